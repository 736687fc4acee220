package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// runSetup starts a proxy for setup, offers it the three streams at once
// and sums up what came back and what the proxy used. A proxy that does
// not start is a result with Error set.
func runSetup(ctx context.Context, o options, setup, proxyBin, dir, upstream string, c *http.Client) result {
	res := result{Setup: setup}
	px, err := startProxy(ctx, proxyBin, dir, setup, upstream, o)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer px.Stop()
	if res.Proxy.StartRSSBytes, _, _, err = procUsage(px.Pid()); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}

	// Keys no output of the proxy could hold by chance, new for each setup.
	tag := strings.ToLower(rand.Text()[:8])
	heavyKey := "heavy-" + tag
	well := make([]string, o.wellKeys)
	for i := range well {
		well[i] = fmt.Sprintf("well-%s-%03d", tag, i)
	}
	begin := time.Now().Add(100 * time.Millisecond)
	streams := []*stream{
		{name: "heavy", perSecond: o.heavyRate, begin: begin.Add(o.late), span: o.duration - o.late, keyOf: func(int) string { return heavyKey }},
		{name: "well", perSecond: o.wellKeys * o.wellRate, begin: begin.Add(o.late), span: o.duration - o.late, keyOf: func(i int) string { return well[i%len(well)] }},
		{name: "churn", perSecond: o.churnRate, begin: begin, span: o.duration, keyOf: func(i int) string { return fmt.Sprintf("churn-%s-%07d", tag, i) }},
	}
	slots := make(chan struct{}, o.maxInFlight)
	var wg sync.WaitGroup
	for _, s := range streams {
		if s.perSecond > 0 {
			wg.Go(func() { s.pace(ctx, c, "http://"+px.listen+"/search", slots) })
		}
	}
	wg.Wait()

	var cpu float64
	if res.Proxy.PeakRSSBytes, res.Proxy.EndRSSBytes, cpu, err = procUsage(px.Pid()); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	res.Proxy.CPUSeconds = cpu
	res.Proxy.CPUPercent = 100 * cpu / time.Since(begin).Seconds()
	res.DurationSeconds = o.duration.Seconds()
	res.Heavy, res.Well, res.Churn = summarize(streams[0]), summarize(streams[1]), summarize(streams[2])
	if span := streams[0].last.Sub(streams[0].first); setup == "perkey" && span > 0 {
		res.HeavySpanSeconds = span.Seconds()
		res.HeavyLimit = ruleSize + ruleRate*span.Seconds()
		res.HeavyPercentOfLimit = 100 * float64(res.Heavy.Served) / res.HeavyLimit
	}
	if got, want := res.Churn.SentPerSecond, float64(o.churnRate); got < 0.95*want {
		res.Notes = append(res.Notes, fmt.Sprintf("the client sent the churn at %.0f/s of the %.0f/s asked: the machine could not generate more", got, want))
	}
	if lag := res.Churn.LagP99Seconds; lag > 0.1 {
		res.Notes = append(res.Notes, fmt.Sprintf("the client sent late (churn lag p99 %v): the machine was busy", time.Duration(lag*float64(time.Second)).Round(time.Millisecond)))
	}
	if setup == "perkey" {
		if err := readStatus(ctx, c, px.admin, &res, streams[0]); err != nil {
			res.Notes = append(res.Notes, err.Error())
		}
	}
	if res.Metrics, err = readMetrics(ctx, c, px.admin); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	return res
}

// readStatus reads the per-key rule's figures from the admin port's
// /status: the keys tracked exactly, and whether the heaviest key is the
// heavy key.
func readStatus(ctx context.Context, c *http.Client, admin string, res *result, heavy *stream) error {
	b, err := benchproc.Get(ctx, c, "http://"+admin+"/status")
	if err != nil {
		return err
	}
	var st struct {
		Points []struct {
			Name   string `json:"name"`
			PerKey []struct {
				Tracked  int `json:"tracked"`
				MaxKeys  int `json:"maxKeys"`
				Heaviest []struct {
					Label  string `json:"label"`
					Visits int64  `json:"visits"`
				} `json:"heaviest"`
			} `json:"perKey"`
		} `json:"points"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("/status: %v", err)
	}
	for _, p := range st.Points {
		if p.Name != "api.search" || len(p.PerKey) != 1 {
			continue
		}
		r := p.PerKey[0]
		res.KeysTracked = r.Tracked
		if label := heavy.label.Load(); label != nil && len(r.Heaviest) > 0 {
			res.HeaviestIsHeavy = r.Heaviest[0].Label == *label
		}
	}
	return nil
}

// readMetrics returns the lines of the admin port's /metrics that the
// report quotes.
func readMetrics(ctx context.Context, c *http.Client, admin string) ([]string, error) {
	b, err := benchproc.Get(ctx, c, "http://"+admin+"/metrics")
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); reported(l) {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// reported tells whether a line of /metrics is one the report quotes:
// the rule's, the requests the proxy counted, and its connections (a
// client past maxConnections finds idle ones closed).
func reported(line string) bool {
	for _, p := range []string{"sds_perkey_keys{", "sds_requests_total{", "sds_connections"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return strings.HasPrefix(line, "sds_degraded_total{") && strings.Contains(line, `strategy="key_`)
}
