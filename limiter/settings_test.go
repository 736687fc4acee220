package limiter

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestZeroSettingsIsOff: the zero Settings judges nothing, whatever the
// traffic and its failures.
func TestZeroSettingsIsOff(t *testing.T) {
	p := mustPoint(t, Settings{})
	for i := range 1000 {
		v, c := enter(p, at(time.Duration(i)*ms))
		if !v.Allowed || v.Strategy != 0 {
			t.Fatalf("request %d: got %+v, want allowed with no strategy", i, v)
		}
		c.Exit(at(time.Duration(i)*ms+time.Hour), Failed)
	}
	if p.TimeoutThreshold() != 0 {
		t.Errorf("TimeoutThreshold() = %v, want 0 (off)", p.TimeoutThreshold())
	}
	if got := p.Settings().DowngradePercent(); got != 100 {
		t.Errorf("DowngradePercent() = %d, want 100", got)
	}
}

func TestThreshold(t *testing.T) {
	for _, tt := range []struct {
		t      Threshold
		n      int64
		on     bool
		string string
	}{
		{Threshold{}, 0, false, "off"},
		{At(0), 0, true, "0"},
		{At(250), 250, true, "250"},
	} {
		n, on := tt.t.Get()
		if n != tt.n || on != tt.on || tt.t.String() != tt.string {
			t.Errorf("got %d, %v, %q; want %d, %v, %q", n, on, tt.t.String(), tt.n, tt.on, tt.string)
		}
	}
	if At(0) == (Threshold{}) {
		t.Errorf("At(0) == the zero Threshold, want them apart: 0 is a threshold, the zero Threshold is off")
	}
}

// TestPolicyCheck: each limit at its boundary; the value on the limit
// passes, one beyond it is reported as a *FieldError naming the field.
func TestPolicyCheck(t *testing.T) {
	year := 365 * 24 * time.Hour
	for _, tt := range []struct {
		name  string
		p     Policy
		field string // "" when the policy is within its limits
	}{
		{"zero", Policy{}, ""},
		{"visit 0", Policy{VisitThreshold: At(0)}, ""},
		{"visit -1", Policy{VisitThreshold: At(-1)}, "VisitThreshold"},
		{"concurrent -1", Policy{ConcurrentThreshold: At(-1)}, "ConcurrentThreshold"},
		{"exception -1", Policy{ExceptionThreshold: At(-1)}, "ExceptionThreshold"},
		{"timeout count -1", Policy{TimeoutCountThreshold: At(-1)}, "TimeoutCountThreshold"},
		{"rate 100", Policy{ExceptionRateThreshold: At(100)}, ""},
		{"rate 101", Policy{ExceptionRateThreshold: At(101)}, "ExceptionRateThreshold"},
		{"rate -1", Policy{ExceptionRateThreshold: At(-1)}, "ExceptionRateThreshold"},
		{"downgrade 0", Policy{DowngradeRate: At(0)}, ""},
		{"downgrade 100", Policy{DowngradeRate: At(100)}, ""},
		{"downgrade 101", Policy{DowngradeRate: At(101)}, "DowngradeRate"},
		{"downgrade -1", Policy{DowngradeRate: At(-1)}, "DowngradeRate"},
		{"tokens at the limit", Policy{TokensPerSecond: At(MaxTokensPerSecond)}, ""},
		{"tokens beyond the limit", Policy{TokensPerSecond: At(MaxTokensPerSecond + 1)}, "TokensPerSecond"},
		{"tokens 0", Policy{TokensPerSecond: At(0)}, "TokensPerSecond"},
		{"size 0", Policy{TokensPerSecond: At(1), TokenBucketSize: At(0)}, "TokenBucketSize"},
		{"size filling in 100 years", Policy{TokensPerSecond: At(1), TokenBucketSize: At(int64(100 * year / time.Second))}, ""},
		{"size filling in 100 years and a second", Policy{TokensPerSecond: At(1), TokenBucketSize: At(int64(100*year/time.Second) + 1)}, "TokenBucketSize"},
		{"size without a rate", Policy{TokenBucketSize: At(1 << 62)}, ""},
		{"delay -1ns", Policy{DelayTime: -1}, "DelayTime"},
		{"retry -1ns", Policy{RetryInterval: -1}, "RetryInterval"},
		{"negative timeout and start are off", Policy{TimeoutThreshold: -time.Second, ExceptionRateStart: -3}, ""},
	} {
		err := tt.p.Check()
		var fe *FieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: got %v, want nil", tt.name, err)
		case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field || fe.Problem == ""):
			t.Errorf("%s: got %v, want a *FieldError for %s", tt.name, err, tt.field)
		}
		if s := (Settings{Policy: tt.p}); (s.Check() == nil) != (err == nil) {
			t.Errorf("%s: Settings.Check() = %v, Policy.Check() = %v, want both nil or neither", tt.name, s.Check(), err)
		}
	}
}

// TestPolicyJudges: a strategy is judged exactly when the point gives a
// reading for it (the readings that are always there once on: visit to
// exception rate), on random policies; pressure tests and the ramp follow
// their own switches, and the fleet-wide bucket is never the limiter's.
func TestPolicyJudges(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for range 2000 {
		s := randomSettings(r)
		p := mustPoint(t, s)
		read := map[Strategy]bool{}
		for _, rd := range p.Snapshot(t0).Status.Readings {
			read[rd.Strategy] = true
		}
		for st := Visit; st <= ExceptionRate; st++ {
			if got := s.Judges(st); got != read[st] {
				t.Fatalf("%+v: Judges(%v) = %v, but a reading is there: %v", s.Policy, st, got, read[st])
			}
		}
		if s.Judges(PressureTest) != s.PressureTestDowngrade || s.Judges(Recovery) != (s.RecoveryTime > 0) {
			t.Fatalf("%+v: Judges(pressure_test, recovery) = %v, %v", s.Policy, s.Judges(PressureTest), s.Judges(Recovery))
		}
		if s.Judges(ClusterTokenBucket) {
			t.Fatalf("%+v: Judges(cluster_token_bucket) = true", s.Policy)
		}
	}
}
