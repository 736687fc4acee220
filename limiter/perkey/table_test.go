package perkey

import (
	"errors"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newTable(tb testing.TB, s Settings) *Table {
	tb.Helper()
	t, err := New(s)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// where puts key in the sketch (the table's only exact entry held by a
// busy filler key) or leaves it to be tracked exactly.
func where(tb testing.TB, tab *Table, key uint64, sketch bool) {
	tb.Helper()
	if !sketch {
		return
	}
	filler := key + 1
	var c Call
	tab.Enter(&c, at(0), filler) // holds the entry: a visit, a token, a call in flight
	if tab.Len() != 1 || tab.shard(key).find(key) >= 0 {
		tb.Fatalf("filler: Len %d, want 1", tab.Len())
	}
}

type step struct {
	at      time.Duration
	exit    int // > 0: exit the call of this step (1-based) instead of entering
	allowed bool
	st      limiter.Strategy
	count   int64
}

func run(t *testing.T, s Settings, sketch bool, steps []step) {
	tab := newTable(t, s)
	const key = 0xdead_beef
	where(t, tab, key, sketch)
	calls := make([]Call, len(steps))
	for i, st := range steps {
		if st.exit > 0 {
			calls[st.exit-1].Exit()
			continue
		}
		v := tab.Enter(&calls[i], at(st.at), key)
		if v.Allowed != st.allowed || v.Strategy != st.st || (!v.Allowed && v.Count != st.count) {
			t.Fatalf("step %d at %v: got %+v, want allowed %v strategy %v count %d", i+1, st.at, v, st.allowed, st.st, st.count)
		}
	}
}

func TestBoundaries(t *testing.T) {
	ok := func(d time.Duration) step { return step{at: d, allowed: true} }
	no := func(d time.Duration, s limiter.Strategy, n int64) step { return step{at: d, st: s, count: n} }
	cases := []struct {
		name  string
		s     Settings
		steps []step
	}{
		{"visit: threshold passes, threshold+1 trips", Settings{VisitThreshold: limiter.At(3)},
			[]step{ok(0), ok(0), ok(time.Second), no(time.Second, Visit, 4), no(9*time.Second, Visit, 4)}},
		{"visit: a bucket's visits leave with it", Settings{VisitThreshold: limiter.At(3)},
			[]step{ok(0), ok(0), ok(5 * time.Second), no(9999*time.Millisecond, Visit, 4),
				ok(10 * time.Second), ok(10 * time.Second), no(10*time.Second, Visit, 4),
				ok(15 * time.Second)}},
		{"visit: degraded requests are not counted", Settings{VisitThreshold: limiter.At(1)},
			[]step{ok(0), no(0, Visit, 2), no(0, Visit, 2), ok(10 * time.Second)}},
		{"visit: 0 degrades all", Settings{VisitThreshold: limiter.At(0)},
			[]step{no(0, Visit, 1)}},
		{"token bucket: capacity, then one per interval", Settings{TokensPerSecond: limiter.At(10), TokenBucketSize: limiter.At(3)},
			// capacity max(3, 10) = 10
			[]step{ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), no(0, TokenBucket, 10),
				no(99*time.Millisecond, TokenBucket, 10), ok(100 * time.Millisecond), no(100*time.Millisecond, TokenBucket, 10)}},
		{"token bucket: size above the rate", Settings{TokensPerSecond: limiter.At(1), TokenBucketSize: limiter.At(2)},
			[]step{ok(0), ok(0), no(0, TokenBucket, 2), ok(time.Second), no(time.Second, TokenBucket, 2), ok(3 * time.Second), ok(3 * time.Second)}},
		{"concurrent: threshold passes, Exit frees once", Settings{ConcurrentThreshold: limiter.At(2)},
			[]step{ok(0), ok(0), no(0, Concurrent, 3), {exit: 1}, {exit: 1}, ok(0), no(0, Concurrent, 3), {exit: 2}, ok(0)}},
		{"off: nothing degrades", Settings{},
			[]step{ok(0), ok(0), ok(0)}},
	}
	for _, c := range cases {
		for _, sk := range []bool{false, true} {
			name := c.name + "/exact"
			if sk {
				name = c.name + "/sketch"
			}
			t.Run(name, func(t *testing.T) {
				s := c.s
				s.MaxKeys = 1
				run(t, s, sk, c.steps)
			})
		}
	}
}

func TestKeysApart(t *testing.T) {
	tab := newTable(t, Settings{VisitThreshold: limiter.At(2), MaxKeys: 100})
	for k := range uint64(50) {
		for i := range 2 {
			if v := tab.Enter(nil, at(0), k); !v.Allowed {
				t.Fatalf("key %d visit %d: got %+v, want allowed", k, i+1, v)
			}
		}
		if v := tab.Enter(nil, at(0), k); v.Strategy != Visit {
			t.Fatalf("key %d visit 3: got %+v, want Visit", k, v)
		}
	}
	if got := tab.Len(); got != 50 {
		t.Fatalf("Len: got %d, want 50", got)
	}
}

func TestHeaviest(t *testing.T) {
	tab := newTable(t, Settings{MaxKeys: 100})
	for k := uint64(1); k <= 5; k++ {
		for range k {
			tab.Enter(nil, at(0), k<<61|k)
		}
	}
	got := tab.Heaviest(at(time.Second), 3)
	if len(got) != 3 || got[0].Visits != 5 || got[1].Visits != 4 || got[2].Visits != 3 || got[0].Key != 5<<61|5 {
		t.Fatalf("Heaviest: got %+v, want keys 5, 4, 3 with 5, 4, 3 visits", got)
	}
	if got := tab.Heaviest(at(10*time.Second), 3); len(got) != 0 {
		t.Fatalf("Heaviest after the window: got %+v, want none", got)
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		s     Settings
		field string
	}{
		{Settings{MaxKeys: MaxMaxKeys + 1}, "MaxKeys"},
		{Settings{MaxKeys: -1}, "MaxKeys"},
		{Settings{Buckets: MaxBuckets + 1, Window: time.Duration(MaxBuckets+1) * time.Second}, "Buckets"},
		{Settings{VisitThreshold: limiter.At(-1)}, "VisitThreshold"},
		{Settings{VisitThreshold: limiter.At(MaxVisitThreshold + 1)}, "VisitThreshold"},
		{Settings{ConcurrentThreshold: limiter.At(MaxConcurrentThreshold + 1)}, "ConcurrentThreshold"},
		{Settings{TokensPerSecond: limiter.At(0)}, "TokensPerSecond"},
		{Settings{Window: 10, Buckets: 3}, "Window"},
	}
	for _, c := range cases {
		err := c.s.Check()
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Check(%+v): got %v, want a FieldError on %s", c.s, err, c.field)
		}
		if _, err := New(c.s); err == nil {
			t.Errorf("New(%+v): got no error, want one on %s", c.s, c.field)
		}
	}
	if err := (Settings{}).Check(); err != nil {
		t.Errorf("Check of the zero Settings: got %v, want nil", err)
	}
}

// TestDropOnlyEmpty: a key leaves the exact table only once it holds
// nothing; meanwhile a new key is judged in the sketch, and a key moving
// from the sketch to the table keeps its count.
func TestDropOnlyEmpty(t *testing.T) {
	tab := newTable(t, Settings{VisitThreshold: limiter.At(2), TokensPerSecond: limiter.At(1), ConcurrentThreshold: limiter.At(1), MaxKeys: 1})
	var a, b Call
	tab.Enter(&a, at(0), 1)
	tab.Enter(&b, at(0), 2) // in the sketch: key 1 holds a call
	if tab.shard(2).find(2) >= 0 {
		t.Fatal("key 2 took the entry of a key with a call in flight")
	}
	a.Exit()
	// At 11s key 1's visit and token are gone: key 2 takes its entry,
	// starting from the sketch's count (1 visit, 1 call in flight).
	if v := tab.Enter(nil, at(9*time.Second), 2); v.Strategy != Concurrent || v.Count != 2 {
		t.Fatalf("key 2 at 9s: got %+v, want Concurrent with count 2", v)
	}
	if tab.shard(2).find(2) >= 0 {
		t.Fatal("key 2 took the entry of a key with a visit in the window")
	}
	b.Exit()
	if v := tab.Enter(nil, at(10*time.Second), 2); !v.Allowed || tab.shard(2).find(2) < 0 {
		t.Fatalf("key 2 at 10s: got %+v (exact %v), want allowed and exact", v, tab.shard(2).find(2) >= 0)
	}
	if v := tab.Enter(nil, at(10500*time.Millisecond), 2); v.Strategy != TokenBucket {
		t.Fatalf("key 2 at 10.5s: got %+v, want TokenBucket", v)
	}
}

func limitAt(n int64) limiter.Threshold { return limiter.At(n) }

// TestBytes: Bytes tells, without making one, what a table of the same
// settings holds.
func TestBytes(t *testing.T) {
	for _, s := range []Settings{
		{VisitThreshold: limiter.At(1)},
		{TokensPerSecond: limiter.At(5), MaxKeys: 1},
		{ConcurrentThreshold: limiter.At(2), MaxKeys: 255},
		{VisitThreshold: limiter.At(3), TokensPerSecond: limiter.At(1), ConcurrentThreshold: limiter.At(1), MaxKeys: 100_001, Buckets: 7, Window: 7 * time.Second},
		{VisitThreshold: limiter.At(3), MaxKeys: 4097, Buckets: 1000, Window: time.Second},
	} {
		tab, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Bytes(s), tab.Bytes(); got != want {
			t.Errorf("Bytes(%+v) = %d, want the table's %d", s, got, want)
		}
	}
	if got := Bytes(Settings{MaxKeys: -1}); got != 0 {
		t.Errorf("Bytes of settings beyond the limits = %d, want 0", got)
	}
}

// TestHeaviestChangesNothing: reading the heaviest keys, however often,
// leaves a full table able to drop a key whose visits left the window, and
// reports each key's count in the window as Enter would judge it.
func TestHeaviestChangesNothing(t *testing.T) {
	tab := newTable(t, Settings{VisitThreshold: limiter.At(5), MaxKeys: 1})
	tab.Enter(nil, at(0), 1)
	tab.Enter(nil, at(time.Second), 1)
	for s := time.Duration(0); s <= 10*time.Second; s += 500 * time.Millisecond {
		got := tab.Heaviest(at(s), 5)
		want := 2
		switch {
		case s >= 11*time.Second:
			want = 0
		case s >= 10*time.Second:
			want = 1 // the visit at 0 left with its bucket
		}
		if n := len(got); want == 0 && n != 0 || want > 0 && (n != 1 || got[0].Visits != int64(want)) {
			t.Fatalf("Heaviest at %v = %+v, want key 1 with %d visits", s, got, want)
		}
	}
	tab.Heaviest(at(11*time.Second), 5)
	if tab.Enter(nil, at(11*time.Second), 2); tab.shard(2).find(2) < 0 {
		t.Error("key 2 at 11s: not tracked exactly, want it in the place of key 1, whose visits left the window (Heaviest must not make it look busy)")
	}
}
