package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/cmd/internal/suggest"
	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
)

// suggestCmd reads the proxy's access log and prints a proposed points:
// block of sds.yaml, each value with how it was derived (package
// cmd/internal/suggest has the rules). -config gives the window the
// thresholds are for (without it, the default 10s in 10 buckets), and the
// points' current values, shown beside the proposals. Lines that cannot
// be read are counted in the block's header, never fatal.
func suggestCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("suggest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logPath := fs.String("access-log", "", "the proxy's log with its access lines (accessLog: true); - reads stdin")
	cfgPath := fs.String("config", "", "the sds.yaml whose window and buckets the thresholds are for (default: 10s in 10 buckets)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("suggest: unexpected arguments %q", fs.Args())
	case *logPath == "":
		return cli.Usagef("suggest: give -access-log FILE, the proxy's log with accessLog: true (- for stdin)")
	}
	var opts suggest.Options
	if *cfgPath != "" {
		f, err := config.Load(*cfgPath, config.Options{})
		if err != nil {
			return fmt.Errorf("suggest: -config: %w", err)
		}
		opts.Window, opts.Buckets, opts.Points = f.Window, f.Buckets, currentPoints(f)
	}
	in, source := io.Reader(os.Stdin), "stdin"
	if *logPath != "-" {
		file, err := os.Open(*logPath)
		if err != nil {
			return fmt.Errorf("suggest: %w", err)
		}
		defer file.Close()
		in, source = file, *logPath
	}
	rep, err := suggest.Read(in, opts)
	if err != nil {
		return fmt.Errorf("suggest: reading %s: %w", source, err)
	}
	return rep.WriteYAML(stdout, source)
}

// currentPoints returns f's points with their values of the keys suggest
// proposes, as sds.yaml writes them; an off key is absent.
func currentPoints(f *config.File) []suggest.Current {
	out := make([]suggest.Current, len(f.Points))
	for i := range f.Points {
		p := &f.Points[i]
		values := map[string]string{}
		if p.TimeoutThreshold > 0 {
			values["timeoutThreshold"] = p.TimeoutThreshold.String()
		}
		for key, t := range map[string]limiter.Threshold{
			"timeoutCountThreshold":  p.TimeoutCountThreshold,
			"visitThreshold":         p.VisitThreshold,
			"concurrentThreshold":    p.ConcurrentThreshold,
			"exceptionRateThreshold": p.ExceptionRateThreshold,
		} {
			if n, on := t.Get(); on {
				values[key] = strconv.FormatInt(n, 10)
			}
		}
		if _, on := p.ExceptionRateThreshold.Get(); on {
			values["exceptionRateStart"] = strconv.FormatInt(p.ExceptionRateStart, 10)
		}
		out[i] = suggest.Current{Name: p.Name, Values: values}
	}
	return out
}
