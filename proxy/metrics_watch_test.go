package proxy_test

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/proxy"
)

// watchModes returns the samples of sds_config_watch_mode by mode.
func watchModes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "sds_config_watch_mode" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return got
}

func TestSetWatchMode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := proxy.NewMetrics(reg, func() []*proxy.Point { return nil })
	for _, step := range []struct {
		set  string // "" sets nothing
		want map[string]float64
	}{
		{"", map[string]float64{"inotify": 0, "polling": 0}},
		{"inotify", map[string]float64{"inotify": 1, "polling": 0}},
		{"polling", map[string]float64{"inotify": 0, "polling": 1}},
		{"polling", map[string]float64{"inotify": 0, "polling": 1}},
		{"inotify", map[string]float64{"inotify": 1, "polling": 0}},
		{"fanotify", map[string]float64{"inotify": 0, "polling": 0, "fanotify": 1}},
	} {
		if step.set != "" {
			m.SetWatchMode(step.set)
		}
		if got := watchModes(t, reg); !maps.Equal(got, step.want) {
			t.Errorf("after %q: got %v, want %v", step.set, got, step.want)
		}
	}
}
