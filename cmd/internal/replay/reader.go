package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The Reader's defaults (ReaderOptions).
const (
	// DefaultHorizon is the longest a request is taken to have lasted: a
	// minute, past every upstreamTimeout worth having; a longer one (a
	// stream) comes out late, and is judged approximately. The entries it
	// holds are a minute of the log's lines.
	DefaultHorizon = time.Minute
	// DefaultMaxLine bounds a log line, in bytes.
	DefaultMaxLine = 1 << 20
	// DefaultMaxPending bounds the entries held back for ordering, and
	// so the reader's memory whatever the log's rate: 65,536 entries,
	// about 64 MiB at most.
	DefaultMaxPending = 1 << 16
	// maxProblems bounds ReaderStats.Problems.
	maxProblems = 5
)

// ReaderOptions shape a Reader. The zero value reads with the defaults.
type ReaderOptions struct {
	// Horizon is the longest a request is taken to have lasted, from its
	// arrival to its log line: an entry is released once a line written
	// more than Horizon after it arrived has been read. A request that
	// lasted longer may come out late (ReaderStats.Late). Zero or less
	// means DefaultHorizon.
	Horizon time.Duration
	// MaxLine bounds a line in bytes, its prefix included (a CRI line
	// split in partial records is bounded once joined); a longer one is
	// skipped and counted in ReaderStats.Long. Zero or less means
	// DefaultMaxLine.
	MaxLine int
	// MaxPending bounds the entries held back for ordering, whatever
	// their instants: with more, the earliest is released before its
	// horizon has passed, and a later line that arrived before it comes
	// out late. It bounds memory against a log whose instants do not
	// move. Zero or less means DefaultMaxPending.
	MaxPending int
}

// ReaderStats counts what a Reader has read so far; it is the "log" of
// `sds-proxy replay -o json`. Lines = Access + Other + Malformed + Older +
// Truncated + Long.
type ReaderStats struct {
	// Lines counts the log lines read; blank ones are left out, and a
	// CRI line split in partial records counts once.
	Lines int `json:"lines"`
	// Access counts the access lines turned into entries: every one is
	// returned by Next.
	Access int `json:"access"`
	// Other counts the proxy's other log lines ("serving", "point
	// tripped", "config reloaded"...), skipped.
	Other int `json:"other"`
	// Malformed counts the lines skipped because they are not JSON log
	// lines, or are access lines without a field replay needs (arrived,
	// point, method, path, status) or with one that cannot be read.
	Malformed int `json:"malformed"`
	// Older counts the access lines without "arrived", written by a proxy
	// older than replay: skipped.
	Older int `json:"older"`
	// Truncated counts the lines the log ends inside of (a log cut while
	// it was written): its last line when it has no line end and is not
	// valid JSON, and a CRI line whose last record never came. Skipped.
	Truncated int `json:"truncated"`
	// Long counts the lines longer than ReaderOptions.MaxLine, skipped.
	Long int `json:"long"`
	// Late counts the entries that arrived before one already returned,
	// as their request lasted longer than the horizon (or more than
	// MaxPending entries were held): returned out of arrival order.
	Late int `json:"late"`
	// Problems are the first lines skipped as malformed, truncated or
	// long, and the first from an older proxy, at most 5, in input order.
	Problems []Problem `json:"problems"`
}

// Problem is a line the Reader skipped, and why.
type Problem struct {
	// Line is the line's number in its input, from 1.
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func (p Problem) String() string { return fmt.Sprintf("line %d: %s", p.Line, p.Reason) }

// Reader reads sds-proxy's log (the access lines among its other lines,
// as JSON lines, bare or prefixed by kubectl's --timestamps or a
// container runtime's CRI format) and returns its access lines as
// Entries in the order the requests arrived.
//
// The log is written at each request's end, so its lines come in the
// order requests ended. The Reader holds entries back in a heap by
// arrival and releases the earliest once a line written more than
// Horizon after it arrived has been read, everything at the end: its
// memory is bounded by the lines within the horizon (and MaxPending),
// never the whole log.
//
//	log:     ... [ended t-H-ε] ... [ended t-1] [ended t]   ← newest ts
//	held:    every entry that arrived at or after t-H
//	released in arrival order: every entry that arrived before t-H
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br         *bufio.Reader
	horizon    int64 // ns
	maxLine    int
	maxPending int

	line    int    // the physical lines read
	buf     []byte // a line longer than br's buffer
	partial [2]criPartial
	done    bool
	err     error

	// newest is the latest instant read (ts or arrived, Unix ns; 0
	// before the first, as every instant read is from 1970 on): every
	// request that arrived before newest-horizon has been read.
	newest   int64
	released bool
	last     int64 // the latest arrival of an entry returned
	seq      uint64

	held  heldHeap
	slots []Entry // the held entries, by slot
	free  []int32 // slots free for reuse

	stats      ReaderStats
	olderNoted bool
	decoded    accessLine
	scanner    scanner
	// interned holds the short strings read (points, hosts, methods,
	// paths...) to share one copy of each among the entries.
	interned map[string]string
}

// criPartial is a CRI line being joined from its partial ("P") records.
type criPartial struct {
	buf  []byte
	line int  // the line of its first record; 0 for none
	long bool // longer than maxLine: skipped to its last record
}

// NewReader returns a Reader of the log r.
func NewReader(r io.Reader, opts ReaderOptions) *Reader {
	rd := &Reader{
		br:         bufio.NewReaderSize(r, 64<<10),
		horizon:    int64(opts.Horizon),
		maxLine:    opts.MaxLine,
		maxPending: opts.MaxPending,
	}
	if rd.horizon <= 0 {
		rd.horizon = int64(DefaultHorizon)
	}
	if rd.maxLine <= 0 {
		rd.maxLine = DefaultMaxLine
	}
	if rd.maxPending <= 0 {
		rd.maxPending = DefaultMaxPending
	}
	return rd
}

// Next returns the next entry in arrival order (ties in input order), or
// false at the end of the log or on a read error (Err).
func (rd *Reader) Next() (Entry, bool) {
	for {
		if rd.held.len() > 0 && (rd.done || rd.releasable()) {
			return rd.pop(), true
		}
		if rd.done {
			return Entry{}, false
		}
		rd.read()
	}
}

// Stats returns the counts so far; after Next has returned false, of the
// whole log.
func (rd *Reader) Stats() ReaderStats {
	s := rd.stats
	s.Problems = append([]Problem(nil), s.Problems...)
	return s
}

// Err returns the error that ended reading the log, other than io.EOF;
// nil at its end. The entries read before it are still returned.
func (rd *Reader) Err() error { return rd.err }

// releasable reports whether the earliest entry held may be returned:
// every request that arrived before it has been read, or too many are
// held.
func (rd *Reader) releasable() bool {
	top := rd.held.items[0].at
	return rd.newest-rd.horizon > top || rd.held.len() > rd.maxPending
}

func (rd *Reader) pop() Entry {
	h := rd.held.pop()
	e := rd.slots[h.slot]
	rd.slots[h.slot] = Entry{}
	rd.free = append(rd.free, h.slot)
	if !rd.released || h.at > rd.last {
		rd.released, rd.last = true, h.at
	}
	return e
}

func (rd *Reader) push(e *Entry) {
	at := e.Arrived.UnixNano()
	if rd.released && at < rd.last {
		rd.stats.Late++
	}
	if !e.Written.IsZero() && e.Written.UnixNano() > rd.newest {
		rd.newest = e.Written.UnixNano()
	}
	if at > rd.newest {
		rd.newest = at
	}
	var slot int32
	if n := len(rd.free); n > 0 {
		slot = rd.free[n-1]
		rd.free = rd.free[:n-1]
	} else {
		slot = int32(len(rd.slots))
		rd.slots = append(rd.slots, Entry{})
	}
	rd.slots[slot] = *e
	rd.held.push(held{at: at, seq: rd.seq, slot: slot})
	rd.seq++
}

var errLongLine = errors.New("line too long")

// read reads the next physical line and handles it; at the end of the
// log (or a read error) it sets done.
func (rd *Reader) read() {
	raw, ended, err := rd.readLine()
	long := errors.Is(err, errLongLine)
	if err != nil && !long {
		if !errors.Is(err, io.EOF) {
			rd.err = err
		}
		defer rd.end()
	}
	if !ended && !long && len(raw) == 0 {
		return
	}
	rd.line++
	n := rd.line
	if long {
		rd.stats.Lines++
		rd.skip(&rd.stats.Long, n, fmt.Sprintf("longer than %d bytes", rd.maxLine))
		return
	}
	content := raw
	if len(raw) > 0 && raw[0] != '{' {
		if stream, final, rest, ok := criRecord(raw); ok {
			if content, n, ok = rd.join(stream, final, rest, n); !ok {
				return
			}
		} else if i := bytes.IndexByte(raw, '{'); i > 0 {
			content = raw[i:] // kubectl logs --timestamps, or another prefix
		}
	}
	if len(bytes.TrimSpace(content)) == 0 {
		return
	}
	rd.stats.Lines++
	rd.decode(content, n, !ended)
}

// end ends the log: a CRI line still waiting for its last record was cut.
func (rd *Reader) end() {
	rd.done = true
	for i := range rd.partial {
		if p := &rd.partial[i]; p.line != 0 {
			rd.stats.Lines++
			rd.skip(&rd.stats.Truncated, p.line, "cut before its end (a CRI partial record without its last)")
			*p = criPartial{}
		}
	}
}

// join adds a CRI record of line n to its stream's line and, at its last
// record, returns the whole line and the number of its first; false while
// the line goes on, or when it was too long (counted).
func (rd *Reader) join(stream int, final bool, rest []byte, n int) ([]byte, int, bool) {
	p := &rd.partial[stream]
	if !final && p.line == 0 {
		p.line = n
	}
	if final && p.line == 0 {
		return rest, n, true // a whole line in one record
	}
	switch {
	case p.long:
	case len(p.buf)+len(rest) > rd.maxLine:
		p.long, p.buf = true, p.buf[:0]
	default:
		p.buf = append(p.buf, rest...)
	}
	if !final {
		return nil, 0, false
	}
	first, long := p.line, p.long
	p.line, p.long = 0, false
	if long {
		rd.stats.Lines++
		rd.skip(&rd.stats.Long, first, fmt.Sprintf("longer than %d bytes", rd.maxLine))
		return nil, 0, false
	}
	line := p.buf
	p.buf = p.buf[:0] // line is valid until the next record of this stream
	return line, first, true
}

// criRecord parses a CRI log record, "<time> <stream> <P|F> <content>",
// into its stream (0 stdout, 1 stderr), whether it is a line's last
// record (F), and its content.
func criRecord(raw []byte) (stream int, final bool, content []byte, ok bool) {
	sp := bytes.IndexByte(raw, ' ')
	if sp <= 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, false, nil, false
	}
	rest := raw[sp+1:]
	switch {
	case bytes.HasPrefix(rest, []byte("stdout ")):
	case bytes.HasPrefix(rest, []byte("stderr ")):
		stream = 1
	default:
		return 0, false, nil, false
	}
	rest = rest[len("stdout "):]
	if len(rest) == 0 || (rest[0] != 'P' && rest[0] != 'F') || (len(rest) > 1 && rest[1] != ' ') {
		return 0, false, nil, false
	}
	final = rest[0] == 'F'
	if len(rest) > 1 {
		content = rest[2:]
	}
	return stream, final, content, true
}

// readLine returns the next line without its end, and whether it had
// one; a line longer than maxLine is skipped to its end and reported as
// errLongLine. The line is valid until the next call.
func (rd *Reader) readLine() (line []byte, ended bool, err error) {
	chunk, err := rd.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(chunk) > rd.maxLine+1 || (len(chunk) > rd.maxLine && chunk[len(chunk)-1] != '\n') {
			return nil, false, errLongLine
		}
		return trimEnd(chunk), len(chunk) > 0 && chunk[len(chunk)-1] == '\n', err
	}
	rd.buf = append(rd.buf[:0], chunk...)
	for {
		chunk, err = rd.br.ReadSlice('\n')
		if len(rd.buf)+len(chunk) > rd.maxLine+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = rd.br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, false, err
			}
			rd.buf = rd.buf[:0]
			return nil, false, errLongLine
		}
		rd.buf = append(rd.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		ended = len(rd.buf) > 0 && rd.buf[len(rd.buf)-1] == '\n'
		if !ended && len(rd.buf) > rd.maxLine {
			return nil, false, errLongLine
		}
		return trimEnd(rd.buf), ended, err
	}
}

func trimEnd(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// skip counts a skipped line in count and notes it among the problems.
func (rd *Reader) skip(count *int, line int, reason string) {
	*count++
	if len(rd.stats.Problems) < maxProblems {
		rd.stats.Problems = append(rd.stats.Problems, Problem{Line: line, Reason: reason})
	}
}

// accessLine is what scan reads of a log line: whether it is an access
// line (logger "access", msg "request") and the fields of one
// (docs/operations.md, Logs). A field left out or null is zero; a field
// given twice is its last.
type accessLine struct {
	logger, msg                                           bool // "access", "request"
	point, host, method, path, priority, strategy, forced string
	outcome, error                                        string
	status                                                int
	hasStatus                                             bool
	degraded, shadow, stale, pressure                     bool
	keys                                                  []string
	ts, arrived, start, ended                             instant
	latency, waited                                       duration
	wrongType                                             string // why a field could not be read, the first
}

// decode turns the log line raw, line n, into an entry, or counts why
// not; cut says the log ends inside it.
func (rd *Reader) decode(raw []byte, n int, cut bool) {
	l := &rd.decoded
	*l = accessLine{}
	if !rd.scan(raw, l) {
		if cut {
			rd.skip(&rd.stats.Truncated, n, "cut before its end (the log's last line, without a line end)")
		} else {
			rd.skip(&rd.stats.Malformed, n, "not a JSON log line")
		}
		return
	}
	switch {
	case !l.logger || !l.msg:
		rd.stats.Other++
	case l.wrongType != "":
		rd.skip(&rd.stats.Malformed, n, l.wrongType)
	case !l.arrived.set:
		rd.stats.Older++
		if !rd.olderNoted && len(rd.stats.Problems) < maxProblems {
			rd.olderNoted = true
			rd.stats.Problems = append(rd.stats.Problems, Problem{Line: n, Reason: "an access line without arrived, from a proxy older than replay (this and every other such line skipped)"})
		}
	case l.point == "" || l.method == "" || l.path == "" || !l.hasStatus:
		rd.skip(&rd.stats.Malformed, n, "an access line without "+l.missing())
	default:
		rd.stats.Access++
		rd.push(&Entry{
			Line:            n,
			Point:           l.point,
			Arrived:         l.arrived.t,
			Written:         l.ts.t,
			Host:            l.host,
			Method:          l.method,
			Path:            l.path,
			Priority:        l.priority,
			Status:          l.status,
			Strategy:        l.strategy,
			Degraded:        l.degraded,
			Shadow:          l.shadow,
			Stale:           l.stale,
			Forced:          l.forced,
			PressureTest:    l.pressure,
			Keys:            l.keys,
			Start:           l.start.t,
			Ended:           l.ended.t,
			UpstreamLatency: l.latency.d,
			Outcome:         l.outcome,
			Error:           l.error,
			Waited:          l.waited.d,
		})
	}
}

// missing names the fields replay needs that l lacks (or has empty).
func (l *accessLine) missing() string {
	var names []string
	for _, f := range [...]struct {
		name string
		ok   bool
	}{{"point", l.point != ""}, {"method", l.method != ""}, {"path", l.path != ""}, {"status", l.hasStatus}} {
		if !f.ok {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, ", ")
}

// scan reads the log line b, a JSON object, into l; false when b is not
// one (as encoding/json would refuse it). It is encoding/json's grammar
// without its reflection and its copies: this is the work of every line
// (BenchmarkScan compares the two).
func (rd *Reader) scan(b []byte, l *accessLine) bool {
	s := &rd.scanner // in the Reader, not on the heap for each line
	*s = scanner{b: b}
	s.space()
	if !s.object(1, func(key []byte, plain bool) bool { return rd.field(s, key, plain, l) }) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// field reads the value of the member key of a line into l, or skips it.
func (rd *Reader) field(s *scanner, key []byte, plain bool, l *accessLine) bool {
	if !plain {
		key = []byte(unquote(key))
	}
	var str *string
	var flag *bool
	var at *instant
	var dur *duration
	switch string(key) {
	case "logger":
		return rd.is(s, "access", &l.logger)
	case "msg":
		return rd.is(s, "request", &l.msg)
	case "point":
		str = &l.point
	case "host":
		str = &l.host
	case "method":
		str = &l.method
	case "path":
		str = &l.path
	case "priority":
		str = &l.priority
	case "strategy":
		str = &l.strategy
	case "forced":
		str = &l.forced
	case "outcome":
		str = &l.outcome
	case "error":
		str = &l.error
	case "degraded":
		flag = &l.degraded
	case "shadow":
		flag = &l.shadow
	case "stale":
		flag = &l.stale
	case "pressure_test":
		flag = &l.pressure
	case "ts":
		at = &l.ts
	case "arrived":
		at = &l.arrived
	case "start":
		at = &l.start
	case "ended":
		at = &l.ended
	case "upstream_latency":
		dur = &l.latency
	case "waited":
		dur = &l.waited
	case "status":
		return rd.status(s, l)
	case "keys":
		return rd.keys(s, l)
	default:
		_, _, ok := s.value(2)
		return ok
	}
	v, kind, ok := s.value(2)
	if !ok {
		return false
	}
	switch {
	case str != nil && kind == '"':
		*str = rd.text(v)
	case str != nil && kind == 'n': // null: not logged
		*str = ""
	case flag != nil && (kind == 't' || kind == 'f' || kind == 'n'):
		*flag = kind == 't'
	case at != nil:
		at.read(v, kind)
		if at.bad {
			l.wrong(string(key) + " is not an instant from 1970 to 2261")
		}
	case dur != nil:
		dur.read(v, kind)
		if dur.bad {
			l.wrong(string(key) + " is not a duration of 0 or more")
		}
	case str != nil:
		l.wrong(string(key) + " is not a string")
	default:
		l.wrong(string(key) + " is not true or false")
	}
	return true
}

// is reads a member whose value says what the line is: seen when it is
// the string want.
func (rd *Reader) is(s *scanner, want string, seen *bool) bool {
	v, kind, ok := s.value(2)
	*seen = ok && kind == '"' && rd.text(v) == want
	return ok
}

// status reads the member status: an integer.
func (rd *Reader) status(s *scanner, l *accessLine) bool {
	v, kind, ok := s.value(2)
	switch {
	case !ok:
		return false
	case kind == 'n':
		l.status, l.hasStatus = 0, false
	case kind == '0':
		n, err := strconv.ParseInt(string(v), 10, 0)
		if err == nil {
			l.status, l.hasStatus = int(n), true
			break
		}
		fallthrough
	default:
		l.wrong("status is not an integer")
	}
	return true
}

// keys reads the member keys: an array of strings (null ones "").
func (rd *Reader) keys(s *scanner, l *accessLine) bool {
	if s.i < len(s.b) && s.b[s.i] != '[' {
		_, kind, ok := s.value(2)
		if ok && kind == 'n' {
			l.keys = nil
		} else if ok {
			l.wrong("keys is not an array of strings")
		}
		return ok
	}
	l.keys = make([]string, 0, 2)
	return s.array(2, func(s *scanner) bool {
		v, kind, ok := s.value(3)
		switch {
		case !ok:
			return false
		case kind == '"':
			l.keys = append(l.keys, rd.text(v))
		case kind == 'n':
			l.keys = append(l.keys, "")
		default:
			l.wrong("keys is not an array of strings")
		}
		return true
	})
}

func (l *accessLine) wrong(why string) {
	if l.wrongType == "" {
		l.wrongType = why
	}
}

// maxInterned bounds Reader.interned, and maxInternedLen the strings in it.
const (
	maxInterned    = 4096
	maxInternedLen = 128
)

// text returns the JSON string v (quotes included), the last value the
// scanner read, as a string; the same short strings are the same string,
// held once (points, hosts, paths...).
func (rd *Reader) text(v []byte) string {
	content := v[1 : len(v)-1]
	if !rd.scanner.plain && !isPlain(content) {
		return unquote(v)
	}
	if len(content) > maxInternedLen {
		return string(content)
	}
	if s, ok := rd.interned[string(content)]; ok {
		return s
	}
	s := string(content)
	if len(rd.interned) < maxInterned {
		if rd.interned == nil {
			rd.interned = map[string]string{}
		}
		rd.interned[s] = s
	}
	return s
}

// isPlain reports whether the content of a JSON string is its value: no
// escapes, valid UTF-8.
func isPlain(content []byte) bool {
	for _, c := range content {
		if c == '\\' || c >= utf8.RuneSelf {
			return bytes.IndexByte(content, '\\') < 0 && utf8.Valid(content)
		}
	}
	return true
}

// unquote returns the value of the JSON string v (quotes included, or a
// key's content), as encoding/json reads it: escapes, and invalid UTF-8
// as U+FFFD.
func unquote(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		v = append(append([]byte{'"'}, v...), '"')
	}
	var s string
	_ = json.Unmarshal(v, &s) // scanner checked v
	return s
}

// scanner reads JSON: encoding/json's grammar (RFC 8259), its nesting
// limit, and nothing of its reflection.
type scanner struct {
	b []byte
	i int
	// plain: the last string read has no escapes and is ASCII, its
	// content is its value.
	plain bool
}

// maxDepth is encoding/json's bound on nesting.
const maxDepth = 10000

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads a value at depth and returns it (a string with its
// quotes) and its kind: '"' a string, '0' a number, 't', 'f' or 'n' a
// literal, '{' an object, '[' an array; false when it is not valid.
func (s *scanner) value(depth int) (v []byte, kind byte, ok bool) {
	if s.i >= len(s.b) {
		return nil, 0, false
	}
	start := s.i
	switch c := s.b[s.i]; {
	case c == '"':
		kind, ok = '"', s.str()
	case c == '-' || c >= '0' && c <= '9':
		kind, ok = '0', s.number()
	case c == 't':
		kind, ok = 't', s.literal("true")
	case c == 'f':
		kind, ok = 'f', s.literal("false")
	case c == 'n':
		kind, ok = 'n', s.literal("null")
	case c == '{':
		kind, ok = '{', s.object(depth, func(_ []byte, _ bool) bool {
			_, _, ok := s.value(depth + 1)
			return ok
		})
	case c == '[':
		kind, ok = '[', s.array(depth, func(s *scanner) bool {
			_, _, ok := s.value(depth + 1)
			return ok
		})
	}
	return s.b[start:s.i], kind, ok
}

// object reads an object at depth, calling member with each key's
// content (and whether it has no escapes) to read its value.
func (s *scanner) object(depth int, member func(key []byte, plain bool) bool) bool {
	if depth > maxDepth || s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		start := s.i
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		key, plain := s.b[start+1:s.i-1], s.plain
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(key, plain || isPlain(key)) {
			return false
		}
		if done, ok := s.after('}'); done || !ok {
			return ok
		}
	}
}

// after reads what follows a member or an element of a collection that
// close ends: a comma and the spaces after it (done false, ok true), or
// close (done and ok true); anything else is malformed (ok false).
func (s *scanner) after(close byte) (done, ok bool) {
	s.space()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.space()
		return false, true
	case close:
		s.i++
		return true, true
	}
	return false, false
}

// array reads an array at depth, calling elem to read each element.
func (s *scanner) array(depth int, elem func(*scanner) bool) bool {
	if depth > maxDepth || s.i >= len(s.b) || s.b[s.i] != '[' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !elem(s) {
			return false
		}
		if done, ok := s.after(']'); done || !ok {
			return ok
		}
	}
}

// str reads a string: no control characters, only JSON's escapes.
func (s *scanner) str() bool {
	s.plain = true
	for i := s.i + 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			s.plain = false
		case c == '\\':
			s.plain = false
			i++
			if i >= len(s.b) {
				return false
			}
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// instant is a logged instant: RFC 3339 text (the access log's instants,
// to the microsecond), zap's ISO 8601 (ts, to the millisecond), or a
// number of seconds since the epoch (zap's default encoder). Set: the
// field was there, not null or ""; bad: it could not be read.
type instant struct {
	t        time.Time
	set, bad bool
}

// tsLayout is zap's ISO8601TimeEncoder, which sds-proxy's logger writes
// ts in (cmd/sds-proxy newLogger).
const tsLayout = "2006-01-02T15:04:05.000Z0700"

// read reads the value v of kind (value's) into t.
func (t *instant) read(v []byte, kind byte) {
	*t = instant{set: true}
	ok := false
	switch {
	case kind == 'n' || kind == '"' && len(v) == 2:
		t.set = false // null or "": not logged
		return
	case kind == '"' && isPlain(v[1:len(v)-1]):
		t.t, ok = parseInstant(v[1 : len(v)-1])
	case kind == '"':
		t.t, ok = parseInstant([]byte(unquote(v)))
	case kind == '0':
		t.t, ok = epochSeconds(v)
	}
	t.bad = !ok || t.t.Year() < 1970 || t.t.Year() >= 2262
}

func parseInstant(s []byte) (time.Time, bool) {
	for _, layout := range [...]string{time.RFC3339Nano, tsLayout} {
		if t, err := time.Parse(layout, string(s)); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

func epochSeconds(b []byte) (time.Time, bool) {
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil || secs < 0 || secs >= 1<<33 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(secs)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC(), true
}

// duration is a logged duration: Go's text ("1.5ms", zap's
// StringDurationEncoder, which sds-proxy's logger uses) or a number of
// seconds (zap's default SecondsDurationEncoder). Bad: it could not be
// read, or is negative.
type duration struct {
	d   time.Duration
	bad bool
}

// read reads the value v of kind (value's) into d.
func (d *duration) read(v []byte, kind byte) {
	*d = duration{}
	ok := false
	switch kind {
	case 'n': // not logged
		return
	case '"':
		if content := v[1 : len(v)-1]; isPlain(content) {
			d.d, ok = parseDuration(content)
		} else {
			d.d, ok = parseDuration([]byte(unquote(v)))
		}
	case '0':
		if secs, err := strconv.ParseFloat(string(v), 64); err == nil && secs >= 0 && secs < math.MaxInt64/1e9 {
			d.d, ok = time.Duration(math.Round(secs*1e9)), true
		}
	}
	d.bad = !ok || d.d < 0
}

// durationUnits are the units of Go's duration text, in nanoseconds.
var durationUnits = [...]struct {
	name string
	ns   uint64
}{{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"μs", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}}

// parseDuration reads Go's duration text as time.Duration.String writes
// it ("1h2m3.5s", "1.5ms", "0s") without allocating, with
// time.ParseDuration's arithmetic, and any other form (a sign, a number
// without digits on one side of its point, very long numbers) through
// time.ParseDuration.
func parseDuration(s []byte) (time.Duration, bool) {
	var total uint64
	rest := s
	for len(rest) > 0 {
		v, n := leadingDigits(rest)
		if n == 0 || n > 18 {
			return slowDuration(s)
		}
		rest = rest[n:]
		var f uint64
		scale := 1.0
		if len(rest) > 0 && rest[0] == '.' {
			if f, n = leadingDigits(rest[1:]); n == 0 || n > 18 {
				return slowDuration(s)
			}
			rest = rest[1+n:]
			for range n {
				scale *= 10
			}
		}
		unit := uint64(0)
		for _, u := range durationUnits {
			if bytes.HasPrefix(rest, []byte(u.name)) && (len(rest) == len(u.name) || rest[len(u.name)] == '.' || rest[len(u.name)] >= '0' && rest[len(u.name)] <= '9') {
				unit, rest = u.ns, rest[len(u.name):]
				break
			}
		}
		if unit == 0 || v > 1<<62/unit {
			return slowDuration(s)
		}
		v *= unit
		if f > 0 {
			v += uint64(float64(f) * (float64(unit) / scale)) // as time.ParseDuration
		}
		if total += v; total > 1<<62 {
			return slowDuration(s)
		}
	}
	if len(s) == 0 {
		return slowDuration(s)
	}
	return time.Duration(total), true
}

// leadingDigits reads the decimal digits that s starts with (at most 19),
// and how many there are.
func leadingDigits(s []byte) (v uint64, n int) {
	for n < len(s) && n < 19 && s[n] >= '0' && s[n] <= '9' {
		v = v*10 + uint64(s[n]-'0')
		n++
	}
	return v, n
}

func slowDuration(s []byte) (time.Duration, bool) {
	d, err := time.ParseDuration(string(s))
	return d, err == nil
}

// held is an entry held in the heap: its arrival (Unix ns), its order in
// the input, and its slot in Reader.slots.
type held struct {
	at   int64
	seq  uint64
	slot int32
}

// heldHeap is a min-heap of held entries by arrival, then input order.
type heldHeap struct{ items []held }

func (h *heldHeap) len() int { return len(h.items) }

func (h *heldHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (h *heldHeap) push(x held) {
	h.items = append(h.items, x)
	for i := len(h.items) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *heldHeap) pop() held {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h.items[i], h.items[c] = h.items[c], h.items[i]
		i = c
	}
	return top
}
