package upstream

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The WebSocket echo of /ws: just enough of RFC 6455 for a proxy test. It
// does the opening handshake, then echoes every data frame as it comes
// (fragments stay fragments), answers pings with pongs and a close with a
// close. Frames from the client must be masked (RFC 6455 §5.1).

// wsGUID is the key suffix of RFC 6455 §1.3.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// WebSocket opcodes.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// AcceptKey returns the Sec-WebSocket-Accept value for a
// Sec-WebSocket-Key: base64(sha1(key + GUID)), RFC 6455 §4.2.2.
func AcceptKey(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// hasToken reports whether the comma-separated header name holds token,
// ignoring case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (h *Handler) websocket(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !hasToken(r.Header, "Connection", "upgrade") || !hasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		http.Error(w, "want a WebSocket upgrade: GET with Connection: Upgrade and Upgrade: websocket", http.StatusUpgradeRequired)
		return
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		http.Error(w, "want Sec-WebSocket-Version: 13", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if raw, err := base64.StdEncoding.DecodeString(key); err != nil || len(raw) != 16 {
		http.Error(w, "want a Sec-WebSocket-Key of 16 bytes in base64", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot upgrade this connection: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	// Close the connection when the Handler closes, which ends the read
	// below; the goroutine ends with the connection.
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-h.done:
			conn.Close()
		case <-finished:
		}
	}()

	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", AcceptKey(key))
	if err := brw.Flush(); err != nil {
		return
	}
	h.echo(brw)
}

// echo runs the frame loop until a close, an error or a protocol violation.
func (h *Handler) echo(brw *bufio.ReadWriter) {
	for {
		f, err := readFrame(brw.Reader, h.maxBody)
		if err != nil {
			var pe protocolError
			if errors.As(err, &pe) {
				writeFrame(brw.Writer, true, opClose, closePayload(uint16(pe), err.Error()))
				brw.Flush()
			}
			return
		}
		switch f.op {
		case opClose:
			payload := f.payload
			if len(payload) >= 2 {
				payload = payload[:2] // echo the status code
			}
			writeFrame(brw.Writer, true, opClose, payload)
			brw.Flush()
			return
		case opPing:
			writeFrame(brw.Writer, true, opPong, f.payload)
		case opPong:
			continue
		default:
			writeFrame(brw.Writer, f.fin, f.op, f.payload)
		}
		if err := brw.Flush(); err != nil {
			return
		}
	}
}

type frame struct {
	fin     bool
	op      byte
	payload []byte
}

// protocolError is a violation of RFC 6455, carrying its close code.
type protocolError uint16

func (e protocolError) Error() string {
	if e == 1009 {
		return "message too big"
	}
	return "protocol error"
}

// readFrame reads one masked client frame with a payload of at most max
// bytes, and unmasks it.
func readFrame(r io.Reader, max int) (frame, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	f := frame{fin: hdr[0]&0x80 != 0, op: hdr[0] & 0x0f}
	masked := hdr[1]&0x80 != 0
	n := uint64(hdr[1] & 0x7f)
	switch {
	case hdr[0]&0x70 != 0, !masked:
		return f, protocolError(1002)
	case f.op >= opClose && (!f.fin || n > 125):
		return f, protocolError(1002)
	case f.op > opBinary && f.op < opClose, f.op > opPong:
		return f, protocolError(1002)
	}
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > uint64(max) {
		return f, protocolError(1009)
	}
	var key [4]byte
	if _, err := io.ReadFull(r, key[:]); err != nil {
		return f, err
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return f, err
	}
	for i := range f.payload {
		f.payload[i] ^= key[i%4]
	}
	return f, nil
}

// writeFrame writes one unmasked server frame.
func writeFrame(w io.Writer, fin bool, op byte, payload []byte) error {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	hdr := make([]byte, 0, 10+len(payload))
	switch n := len(payload); {
	case n <= 125:
		hdr = append(hdr, b0, byte(n))
	case n <= 0xffff:
		hdr = append(hdr, b0, 126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, b0, 127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	_, err := w.Write(append(hdr, payload...))
	return err
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason[:min(len(reason), 123)]...)
}
