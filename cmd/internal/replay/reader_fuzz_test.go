package replay

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzReader feeds a Reader any log: it never panics, Next ends, every
// line is counted once, every access line comes out once, and out of
// arrival order only when counted late.
func FuzzReader(f *testing.F) {
	f.Add(at("/a", 0, time.Second)+"\n"+at("/b", 2*time.Second, 2*time.Second)+"\n"+at("/c", time.Second, 8*time.Second), 5)
	f.Add(`{"logger":"access","msg":"request","ts":1796464800.5,"point":"p","arrived":"2026-12-05T10:00:00.000000Z","method":"GET","path":"/","status":200,"upstream_latency":1e300,"waited":"-1s","keys":["",""]}`, 0)
	f.Add("2026-12-05T10:00:00.1Z stderr P {\"logger\":\n2026-12-05T10:00:00.2Z stderr F \"access\"}\nnot json\n\n{}\n[]\n\"x\"", 1)
	f.Add(`{"logger":"access","msg":"request","arrived":"9999-12-31T23:59:59.999999Z","ts":"0001-01-01T00:00:00.000Z","point":"p","method":"GET","path":"/","status":-1}`+"\r\n"+strings.Repeat("{", 300), 2)
	f.Fuzz(func(t *testing.T, log string, horizon int) {
		rd := NewReader(strings.NewReader(log), ReaderOptions{Horizon: time.Duration(horizon) * time.Second, MaxLine: 256, MaxPending: 3})
		var last time.Time
		n, late := 0, 0
		for e, ok := rd.Next(); ok; e, ok = rd.Next() {
			n++
			if n > strings.Count(log, "\n")+1 {
				t.Fatalf("%d entries from %d lines", n, strings.Count(log, "\n")+1)
			}
			if e.Arrived.Before(last) {
				late++
			}
			if e.Arrived.After(last) {
				last = e.Arrived
			}
		}
		st := rd.Stats()
		if sum := st.Access + st.Other + st.Malformed + st.Older + st.Truncated + st.Long; sum != st.Lines {
			t.Errorf("access+other+malformed+older+truncated+long = %d, want lines %d", sum, st.Lines)
		}
		if st.Access != n || late > st.Late || st.Truncated > 3 || len(st.Problems) > maxProblems {
			t.Errorf("%d entries (%d out of order), stats %+v", n, late, st)
		}
	})
}

// FuzzParseDuration holds parseDuration to time.ParseDuration: the same
// durations, the same refusals.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0s", "1.5ms", "312.456µs", "1h2m3.000000001s", "2562047h47m16.854775807s", "-1s", ".5s", "1.s", "1mss", "1e3s", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseDuration([]byte(s))
		want, err := time.ParseDuration(s)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("parseDuration(%q) = %v, %v; time.ParseDuration: %v, %v", s, got, ok, want, err)
		}
	})
}

// FuzzScan holds the reader's JSON scanner to encoding/json: it refuses
// what json.Valid refuses (and anything but an object), and reads every
// field as encoding/json reads it into a map (exact keys, the last of a
// key given twice, null as absent).
func FuzzScan(f *testing.F) {
	f.Add(at("/a", 0, time.Second))
	f.Add(`{"logger":"access","msg":"request","point":"p\u00e9\ud83d\ude00","po\u0069nt":null,"keys":["a",null,"\\"],"status":-0,"degraded":true,"x":[{"y":[1.5e-3,{}]}],"host":"\xff"}`)
	f.Add(`{"logger":"access","msg":"request","status":1.0,"keys":{},"shadow":"true"} `)
	f.Add(`{"a":1}x`)
	f.Add(` {"a":[1,]} `)
	f.Add(`{"a":"` + "\x01" + `"}`)
	f.Fuzz(func(t *testing.T, line string) {
		rd := NewReader(strings.NewReader(""), ReaderOptions{})
		var l accessLine
		ok := rd.scan([]byte(line), &l)
		trimmed := strings.TrimLeft(line, " \t\r\n")
		if want := json.Valid([]byte(line)) && strings.HasPrefix(trimmed, "{"); ok != want {
			t.Fatalf("scan(%q) = %v, want %v (json.Valid)", line, ok, want)
		}
		if !ok {
			return
		}
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		str := func(k string) (string, bool) {
			switch v := m[k].(type) {
			case nil:
				return "", true
			case string:
				return v, true
			}
			return "", false
		}
		logger, _ := str("logger")
		msg, _ := str("msg")
		if l.logger != (logger == "access") || l.msg != (msg == "request") {
			t.Errorf("logger %v, msg %v; encoding/json: %q, %q", l.logger, l.msg, logger, msg)
		}
		wrong := false
		for k, got := range map[string]string{"point": l.point, "host": l.host, "method": l.method, "path": l.path, "priority": l.priority, "strategy": l.strategy, "forced": l.forced, "outcome": l.outcome, "error": l.error} {
			want, isStr := str(k)
			wrong = wrong || !isStr
			if isStr && got != want {
				t.Errorf("%s = %q, encoding/json: %q", k, got, want)
			}
		}
		for k, got := range map[string]bool{"degraded": l.degraded, "shadow": l.shadow, "stale": l.stale, "pressure_test": l.pressure} {
			switch v := m[k].(type) {
			case nil:
				if got {
					t.Errorf("%s = true, encoding/json: absent", k)
				}
			case bool:
				if got != v {
					t.Errorf("%s = %v, encoding/json: %v", k, got, v)
				}
			default:
				wrong = true
			}
		}
		switch v := m["status"].(type) {
		case nil:
			if l.hasStatus {
				t.Errorf("status %d, encoding/json: absent", l.status)
			}
		case json.Number:
			if n, err := v.Int64(); err != nil || strings.ContainsAny(v.String(), ".eE") {
				wrong = true
			} else if !l.hasStatus || int64(l.status) != n {
				t.Errorf("status %d (%v), encoding/json: %v", l.status, l.hasStatus, v)
			}
		default:
			wrong = true
		}
		switch v := m["keys"].(type) {
		case nil:
			if l.keys != nil {
				t.Errorf("keys %q, encoding/json: absent", l.keys)
			}
		case []any:
			want := make([]string, 0, len(v))
			for _, k := range v {
				s, isStr := k.(string)
				wrong = wrong || (!isStr && k != nil)
				want = append(want, s)
			}
			if !wrong && !slices.Equal(l.keys, want) {
				t.Errorf("keys %q, encoding/json: %q", l.keys, want)
			}
		default:
			wrong = true
		}
		if wrong && l.wrongType == "" {
			t.Errorf("no field of the wrong type found; encoding/json: %v", m)
		}
	})
}
