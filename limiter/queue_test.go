package limiter

import (
	"errors"
	"testing"
	"time"
)

func enterWaiting(p *Point, now time.Time, pr Priority) (Verdict, *Call) {
	c := new(Call)
	return p.Enter(c, now, Request{Priority: pr, Wait: true}), c
}

// A request that asks to wait and fails only a limit in flight gets a
// Wait verdict: nothing counted, no trip, no delay; once a slot frees,
// it is admitted.
func TestWaitAtConcurrencyLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     func(*Settings)
		strat Strategy
	}{
		{"concurrent", func(s *Settings) { s.ConcurrentThreshold = At(2) }, Concurrent},
		{"adaptive", func(s *Settings) { s.AdaptiveConcurrency = AdaptiveConcurrency{On: true, MinLimit: 2, MaxLimit: 2} }, Adaptive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPoint(t, settings(func(s *Settings) {
				tc.s(s)
				s.DelayTime, s.Queue = time.Second, Queue{On: true}
			}))
			now := at(0)
			_, c1 := enterWaiting(p, now, PriorityDefault)
			enterWaiting(p, now, PriorityDefault)
			before := counts(p, now)
			v, c := enterWaiting(p, now, PriorityDefault)
			if !v.Wait || v.Allowed || v.Strategy != tc.strat || v.Count != 3 || v.Threshold != 2 || v.Events != 0 {
				t.Fatalf("third request: %+v, want Wait at %v 3/2, no event", v, tc.strat)
			}
			if got := counts(p, now); got != before || p.InFlight() != 2 {
				t.Errorf("counts %+v in flight %d after a wait, want %+v and 2: a wait counts nothing", got, p.InFlight(), before)
			}
			if sn := p.Snapshot(now); sn.Status.InDelay || !sn.LastTrip.At.IsZero() {
				t.Errorf("in delay %v, last trip %+v: a wait is no trip", sn.Status.InDelay, sn.LastTrip)
			}
			c.Exit(now, OK) // never filled: does nothing
			c1.Exit(now, OK)
			if v, _ := enterWaiting(p, now, PriorityDefault); !v.Allowed || v.Wait {
				t.Errorf("after a slot freed: %+v, want admitted", v)
			}
			// Without Wait the same request is degraded and trips, as
			// without a queue.
			v, _ = enter(p, now)
			if v.Allowed || v.Wait || v.Strategy != tc.strat || v.Events&EventDelayStarted == 0 {
				t.Errorf("without Wait: %+v, want degraded by %v, delay started", v, tc.strat)
			}
		})
	}
}

// A token bucket with a queue paces: a request that waits is told when
// the bucket holds its token, and takes none until then; a token taken
// before a full concurrency limit is given back.
func TestWaitForToken(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.TokensPerSecond, s.ConcurrentThreshold, s.Queue = At(10), At(20), Queue{On: true}
	}))
	now := at(0)
	for range 10 {
		if v, c := enterWaiting(p, now, PriorityDefault); !v.Allowed {
			t.Fatalf("a full bucket: %+v", v)
		} else {
			c.Exit(now, OK)
		}
	}
	v, _ := enterWaiting(p, now, PriorityDefault)
	if !v.Wait || v.Strategy != TokenBucket || v.RetryAfter != 100*time.Millisecond {
		t.Fatalf("empty bucket: %+v, want Wait for the token bucket, RetryAfter 100ms", v)
	}
	if v, _ := enterWaiting(p, now, PriorityDefault); v.RetryAfter != 100*time.Millisecond {
		t.Errorf("again: RetryAfter %v, want 100ms still: a wait takes no token", v.RetryAfter)
	}
	// A sheddable request may use 80% of the 10 tokens: its token is
	// there once 8 are used again, 300ms on.
	if v, _ := enterWaiting(p, now, PrioritySheddable); !v.Wait || v.RetryAfter != 300*time.Millisecond {
		t.Errorf("sheddable: %+v, want Wait, RetryAfter 300ms", v)
	}
	if v, _ := enterWaiting(p, at(100*time.Millisecond), PriorityDefault); !v.Allowed {
		t.Errorf("at the token's instant: %+v, want admitted", v)
	}
}

func TestWaitGivesBackItsToken(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.TokensPerSecond, s.ConcurrentThreshold, s.Queue = At(10), At(1), Queue{On: true}
	}))
	now := at(0)
	enterWaiting(p, now, PriorityDefault) // holds the slot, 9 tokens left
	for range 5 {
		if v, _ := enterWaiting(p, now, PriorityDefault); !v.Wait || v.Strategy != Concurrent {
			t.Fatalf("slot full: %+v, want Wait at concurrent", v)
		}
	}
	if got := p.Snapshot(now).Tokens; got != 9 {
		t.Errorf("tokens left %d after 5 waits at the slot, want 9: each gave its token back", got)
	}
}

// Only a limit in flight or the token bucket waits: any other strategy
// degrades as without a queue, and a shadow point never waits.
func TestWaitOnlyAtLimits(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.VisitThreshold, s.Queue = At(1), Queue{On: true} }))
	enterWaiting(p, at(0), PriorityDefault)
	if v, _ := enterWaiting(p, at(0), PriorityDefault); v.Wait || v.Allowed || v.Strategy != Visit {
		t.Errorf("visit: %+v, want degraded", v)
	}
	p = mustPoint(t, settings(func(s *Settings) { s.ConcurrentThreshold, s.Shadow, s.Queue = At(1), true, Queue{On: true} }))
	enterWaiting(p, at(0), PriorityDefault)
	if v, _ := enterWaiting(p, at(0), PriorityDefault); v.Wait || !v.Allowed || !v.Shadow {
		t.Errorf("shadow: %+v, want forwarded as would-be degraded", v)
	}
	p = mustPoint(t, settings(func(s *Settings) { s.ConcurrentThreshold = At(1) }))
	enterWaiting(p, at(0), PriorityDefault)
	if v, _ := enterWaiting(p, at(0), PriorityDefault); v.Wait || v.Allowed {
		t.Errorf("no queue: %+v, want degraded", v)
	}
}

func TestQueueCheck(t *testing.T) {
	for _, tc := range []struct {
		q     Queue
		field string
	}{
		{Queue{On: true, MaxWait: -time.Second}, "Queue.MaxWait"},
		{Queue{On: true, MaxWait: 2 * time.Minute}, "Queue.MaxWait"},
		{Queue{On: true, Target: 2 * time.Second}, "Queue.Target"},
		{Queue{On: true, Target: 100 * time.Millisecond, Interval: 50 * time.Millisecond}, "Queue.Interval"},
		{Queue{On: true, MaxLength: MaxQueueLength + 1}, "Queue.MaxLength"},
		{Queue{On: true}, ""},
		{Queue{MaxWait: -1}, ""}, // off: not judged
	} {
		err := Policy{Queue: tc.q}.Check()
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want nil", tc.q, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: %v, want a problem with %s", tc.q, err, tc.field)
		}
	}
	d := Queue{On: true}.WithDefaults()
	if d.MaxWait != DefaultQueueMaxWait || d.Interval != 2*DefaultQueueMaxWait || d.MaxLength != DefaultQueueMaxLength || d.Target != 0 {
		t.Errorf("defaults %+v", d)
	}
}

// WholeLimit lets a sheddable request use every slot, past its share;
// without it the share holds.
func TestWholeLimitForSheddable(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.ConcurrentThreshold, s.Queue = At(4), Queue{On: true} }))
	now := at(0)
	for i := range 3 { // the share: 80% of 4
		if v, _ := enterWaiting(p, now, PrioritySheddable); !v.Allowed {
			t.Fatalf("sheddable %d within its share: %+v", i+1, v)
		}
	}
	if v, _ := enterWaiting(p, now, PrioritySheddable); !v.Wait || !v.Sheddable {
		t.Fatalf("fourth sheddable: %+v, want Wait at its share", v)
	}
	c := new(Call)
	if v := p.Enter(c, now, Request{Priority: PrioritySheddable, Wait: true, WholeLimit: true}); !v.Allowed {
		t.Fatalf("fourth sheddable with WholeLimit: %+v, want admitted", v)
	}
	if v := p.Enter(new(Call), now, Request{Priority: PrioritySheddable, Wait: true, WholeLimit: true}); !v.Wait || v.Sheddable {
		t.Errorf("fifth: %+v, want Wait at the whole limit", v)
	}
}
