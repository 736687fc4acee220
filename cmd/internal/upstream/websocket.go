package upstream

import (
	"bufio"
	"crypto/rand"
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
//
// Handshake, WriteClientFrame and ReadServerFrame are the client's side of
// the same frames, for tests that drive /ws directly or through a proxy.

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
		f, err := readFrame(brw.Reader, h.maxBody, true)
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

// readFrame reads one frame with a payload of at most max bytes: masked
// (a client's, which it unmasks) if masked is true, else unmasked (a
// server's). A frame masked the other way is a protocol error.
func readFrame(r io.Reader, max int, masked bool) (frame, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	f := frame{fin: hdr[0]&0x80 != 0, op: hdr[0] & 0x0f}
	n := uint64(hdr[1] & 0x7f)
	switch {
	case hdr[0]&0x70 != 0, (hdr[1]&0x80 != 0) != masked:
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
	if masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, err
		}
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
	return writeFrameMasked(w, fin, op, nil, payload)
}

// writeFrameMasked writes one frame, masked with key if key is not nil (a
// client's frame, RFC 6455 §5.3).
func writeFrameMasked(w io.Writer, fin bool, op byte, key *[4]byte, payload []byte) error {
	b0, mask := op, byte(0)
	if fin {
		b0 |= 0x80
	}
	if key != nil {
		mask = 0x80
	}
	b := make([]byte, 0, 14+len(payload))
	switch n := len(payload); {
	case n <= 125:
		b = append(b, b0, mask|byte(n))
	case n <= 0xffff:
		b = append(b, b0, mask|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, b0, mask|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if key == nil {
		b = append(b, payload...)
	} else {
		b = append(b, key[:]...)
		for i, c := range payload {
			b = append(b, c^key[i%4])
		}
	}
	_, err := w.Write(b)
	return err
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason[:min(len(reason), 123)]...)
}

// Handshake opens a WebSocket to path over conn as a client does (RFC 6455
// §4.1, a random key), and checks the answer: 101, Upgrade: websocket and
// the Sec-WebSocket-Accept of the key. It returns the reader to read the
// server's frames from, which may hold some already.
func Handshake(conn io.ReadWriter, host, path string) (*bufio.Reader, error) {
	var raw [16]byte
	rand.Read(raw[:])
	key := base64.StdEncoding.EncodeToString(raw[:])
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", path, host, key); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") ||
		resp.Header.Get("Sec-WebSocket-Accept") != AcceptKey(key) {
		return nil, fmt.Errorf("WebSocket handshake: got %d %v, want 101 with Upgrade: websocket and Sec-WebSocket-Accept %s", resp.StatusCode, resp.Header, AcceptKey(key))
	}
	return br, nil
}

// WriteClientFrame writes one final frame as a client must: masked, with a
// random key.
func WriteClientFrame(w io.Writer, op byte, payload []byte) error {
	var key [4]byte
	rand.Read(key[:])
	return writeFrameMasked(w, true, op, &key, payload)
}

// maxServerFrame bounds the payload ReadServerFrame accepts.
const maxServerFrame = 16 << 20

// ReadServerFrame reads one frame as a server sends it: final and
// unmasked, with a payload of at most 16 MiB. Anything else is an error.
func ReadServerFrame(r io.Reader) (op byte, payload []byte, err error) {
	f, err := readFrame(r, maxServerFrame, false)
	if err != nil {
		return f.op, nil, fmt.Errorf("WebSocket frame from the server: %w", err)
	}
	if !f.fin {
		return f.op, nil, errors.New("WebSocket frame from the server: not final, want one frame per message")
	}
	return f.op, f.payload, nil
}
