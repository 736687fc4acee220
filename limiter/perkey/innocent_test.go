package perkey

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestInnocentKeys measures the sketch's over-count where it hurts: 10,000
// well-behaved keys (one request each every 10s, far below every limit)
// beside 200,000 distinct churning keys at 5,000/s, at MaxKeys 1,000, so
// that most well-behaved keys live in the sketch, and at MaxKeys 10,000.
// It reports the share of their requests wrongly degraded.
func TestInnocentKeys(t *testing.T) {
	for _, tc := range []struct {
		maxKeys int
		visit   int64
	}{{1000, 300}, {1000, 100}, {1000, 30}, {10_000, 30}, {10_000, 10}} {
		visit := tc.visit
		s := allOn
		s.MaxKeys = tc.maxKeys
		s.VisitThreshold = limitAt(visit)
		tab := newTable(t, s)
		rng := rand.New(rand.NewPCG(5, 6))
		innocent := make([]uint64, 10_000)
		for i := range innocent {
			innocent[i] = rng.Uint64()
		}
		var c Call
		now, sent, wrong, next := t0, 0, 0, 0
		for i := range churnSteps {
			now = now.Add(200 * time.Microsecond)
			tab.Enter(&c, now, rng.Uint64())
			c.Exit()
			if i%5 == 0 { // 1,000/s: each innocent key every 10s
				sent++
				if !tab.Enter(&c, now, innocent[next]).Allowed {
					wrong++
				}
				c.Exit()
				next = (next + 1) % len(innocent)
			}
		}
		share := float64(wrong) / float64(sent)
		load := 60_000 / float64(sketchWidth(tc.maxKeys))
		t.Logf("maxKeys %d, visit threshold %d (%.2f× the load of a cell): %d of %d well-behaved requests degraded (%.4f%%), %d keys exact", tc.maxKeys, visit, float64(visit)/load, wrong, sent, 100*share, tab.Len())
		// Each row's cells share about 60,000 visits per window (the churn
		// and the well-behaved keys) over sketchWidth cells: about 117 a
		// cell at MaxKeys 1,000 (512 cells), 7 at 10,000 (8,192), before
		// conservative update. A threshold well above that is safe; one
		// below it is a sketch too small for the churn, and the figure
		// says how much it costs.
		if float64(visit) >= 2.5*load && share > 0.001 {
			t.Errorf("visit threshold %d: %.4f%% of well-behaved requests degraded, want at most 0.1%%", visit, 100*share)
		}
	}
}

// TestMemory: a table's memory is what New allocates, bounded by the
// package doc's formula, and 200,000 distinct keys add nothing to it.
func TestMemory(t *testing.T) {
	s := allOn
	s.MaxKeys = 10_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab := newTable(t, s)
	rng := rand.New(rand.NewPCG(8, 9))
	now := t0
	var c Call
	for range 200_000 {
		now = now.Add(200 * time.Microsecond)
		tab.Enter(&c, now, rng.Uint64())
		c.Exit()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	b := int64(s.withDefaults().Buckets)
	w := int64(sketchWidth(s.MaxKeys))
	formula := int64(s.MaxKeys)*(40+4*b+16) + rows*w*(4*(b+1)+8+4) + 5<<10
	t.Logf("MaxKeys %d after 200,000 keys: heap grew %d bytes; Bytes() %d; formula %d; %d keys exact",
		s.MaxKeys, grew, tab.Bytes(), formula, tab.Len())
	if int64(tab.Bytes()) > formula {
		t.Errorf("Bytes: got %d, want at most the formula's %d", tab.Bytes(), formula)
	}
	if grew > formula+64<<10 {
		t.Errorf("heap grew %d bytes, want at most the formula's %d (+64 KiB)", grew, formula)
	}
	runtime.KeepAlive(tab)
}
