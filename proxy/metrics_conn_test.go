package proxy_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

func TestRegisterConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := connlimit.Stats{Max: 100, New: 1, Idle: 2, Active: 3, Hijacked: 4, Evicted: 5, Refused: 6, SoftClosed: 7}
	proxy.RegisterConnections(reg, func() connlimit.Stats { return st })
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"sds_connections{state=new}":                   1,
		"sds_connections{state=idle}":                  2,
		"sds_connections{state=active}":                3,
		"sds_connections{state=hijacked}":              4,
		"sds_connections_max":                          100,
		"sds_connections_shed_total{reason=evicted}":   5,
		"sds_connections_shed_total{reason=refused}":   6,
		"sds_connections_shed_total{reason=soft_idle}": 7,
	} {
		if got[key] != want {
			t.Errorf("%s: got %v, want %v", key, got[key], want)
		}
	}
	if len(got) != 8 {
		t.Errorf("got %d series, want 8: %v", len(got), got)
	}
}
