package main

import (
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
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

func TestReloadMetricsWatchMode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newReloadMetrics(reg)
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

func TestRegisterConnectionsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := connlimit.Stats{Max: 100, New: 1, Idle: 2, Active: 3, Hijacked: 4, Evicted: 5, Refused: 6, SoftClosed: 7, Queued: 8}
	registerConnections(reg, func() connlimit.Stats { return st })
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
		"sds_connections_queued_total":                 8,
	} {
		if got[key] != want {
			t.Errorf("%s: got %v, want %v", key, got[key], want)
		}
	}
	if len(got) != 9 {
		t.Errorf("got %d series, want 9: %v", len(got), got)
	}
}

// TestReloadMetricsReloaded: a reload attempt counts by result, and the
// last one's result and the last success's time are the gauges.
func TestReloadMetricsReloaded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newReloadMetrics(reg)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)
	m.Reloaded(true, t0)
	m.Reloaded(false, t0.Add(time.Second))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[key] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"sds_config_reloads_total{result=success}":         1,
		"sds_config_reloads_total{result=failure}":         1,
		"sds_config_last_reload_successful":                0,
		"sds_config_last_reload_success_timestamp_seconds": float64(t0.UnixNano()) / 1e9,
	} {
		if got[key] != want {
			t.Errorf("%s: got %v, want %v", key, got[key], want)
		}
	}
}

func TestRegisterBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerBuildInfo(reg, "v1.2.3")
	families, err := reg.Gather()
	if err != nil || len(families) != 1 || families[0].GetName() != "sds_build_info" {
		t.Fatalf("families: got %v (%v), want sds_build_info alone", families, err)
	}
	f := families[0]
	if len(f.GetMetric()) != 1 {
		t.Fatalf("sds_build_info: got %v, want one series", f)
	}
	m := f.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if f.GetType() != dto.MetricType_GAUGE || m.GetGauge().GetValue() != 1 ||
		len(labels) != 2 || labels["version"] != "v1.2.3" || labels["goversion"] != runtime.Version() {
		t.Errorf("sds_build_info: got %v %v = %v, want a gauge {version=v1.2.3, goversion=%s} = 1",
			f.GetType(), labels, m.GetGauge().GetValue(), runtime.Version())
	}
}
