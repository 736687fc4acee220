package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/cmd/internal/adminclient"
	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// validate checks a config file without starting anything: its warnings
// as FILE:LINE:COL: warning: message and "OK", or every problem (warnings
// included) as FILE:LINE:COL: message and cli.ErrInvalid. Warnings alone do
// not fail it. A file that does not exist is an error that says what to
// run instead (errNoValidateConfig), for main to print (exit 1). With
// -diff ADDR it then prints what applying the file would change at the
// proxy whose admin port is at ADDR (diffAgainst); when that admin port
// fails, it prints nothing, not even OK, and returns the error (exit 1).
// With -o json it prints the outcome as one JSON document instead
// (writeProblems), and takes no -diff.
func validate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "sds.yaml", "config file to check")
	upstream := fs.String("upstream", "", "upstream URL, as given to run (when the file has none)")
	diffAddr := fs.String("diff", "", "admin port (host:port or http://host:port) of a running proxy: print what applying the file would change there")
	timeout := fs.Duration("timeout", 5*time.Second, "with -diff: give up on the admin port after this long")
	output := fs.String("o", "text", "output: text (FILE:LINE:COL: message lines) or json (for editors and CI annotations)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("validate: unexpected arguments %q", fs.Args())
	case *output != "text" && *output != "json":
		return cli.Usagef("validate: -o %q: want text or json", *output)
	case *output == "json" && *diffAddr != "":
		return cli.Usagef("validate: -o json does not combine with -diff")
	}
	var base string
	if *diffAddr != "" {
		var err error
		if base, err = adminclient.URL(*diffAddr); err != nil {
			return fmt.Errorf("validate: %w", err)
		}
	}
	opts := config.Options{Upstream: *upstream}
	f, err := config.Load(*path, opts)
	if *output == "json" {
		return writeProblems(stdout, *path, f, err)
	}
	if errors.Is(err, os.ErrNotExist) {
		given := false
		fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "config" })
		return errNoValidateConfig(*path, given, err)
	}
	if err != nil {
		fmt.Fprintln(stdout, err)
		return cli.ErrInvalid
	}
	var diff string
	if base != "" {
		// Before anything is printed: an OK followed by an error would
		// read as a success to whoever stops at the first line.
		if diff, err = diffAgainst(ctx, f, opts, base, *timeout); err != nil {
			return err
		}
	}
	if len(f.Warnings) > 0 {
		fmt.Fprintln(stdout, f.Warnings)
	}
	fmt.Fprintln(stdout, "OK")
	_, err = io.WriteString(stdout, diff)
	return err
}

// errNoValidateConfig is validate's missingConfig: what to check instead.
func errNoValidateConfig(path string, given bool, err error) error {
	return missingConfig(path, given, err,
		"  sds-proxy validate -config FILE   check the config file FILE\n"+
			"  sds-proxy demo                    run the built-in example; it prints the path of its sds.yaml, a start for yours")
}

// diffAgainst returns what applying local would change at the proxy whose
// admin port is at base: it reads the config file in force there (GET
// /config) and compares the two files. Both are parsed with
// config.ParseText, so that the running proxy's bodyFile and TLS files
// need not exist here: those paths are compared as written, not the
// files' contents. Command-line overrides (-listen, -admin, -upstream) are
// not part of either file and are not compared; -upstream, when given,
// applies to both.
func diffAgainst(ctx context.Context, local *config.File, opts config.Options, base string, timeout time.Duration) (string, error) {
	raw, header, err := adminclient.Get(ctx, base, "/config", timeout)
	if err != nil {
		return "", err
	}
	remotePath := header.Get(admin.ConfigPathHeader)
	if remotePath == "" {
		remotePath = base + "/config"
	}
	running, err := config.ParseText(remotePath, raw, opts)
	if err != nil {
		return "", fmt.Errorf("the config in force at %s does not parse here:\n%w", base, err)
	}
	next, err := config.ParseText(local.Path, local.Raw, opts)
	if err != nil { // Load accepted it, and ParseText checks less
		return "", fmt.Errorf("%s: %w", local.Path, err)
	}
	intro := fmt.Sprintf("against the config in force at %s (%s, sha256 %s):\n", base, adminclient.Cell(remotePath), running.Hash[:12])
	return intro + describeChange(running, next), nil
}

// describeChange says, for a person, what changes from the config in
// force to next: points added and removed, each changed point's settings
// from what to what, the routes removed and added (first match wins, so
// their order counts), the top-level settings that apply on a reload, and
// those that need a restart; "no changes" when nothing does.
func describeChange(running, next *config.File) string {
	c := config.Diff(running, next)
	if c.Empty() {
		return "no changes\n"
	}
	var b strings.Builder
	if len(c.Added) > 0 {
		fmt.Fprintf(&b, "points added: %s\n", strings.Join(c.Added, " "))
	}
	if len(c.Removed) > 0 {
		fmt.Fprintf(&b, "points removed: %s\n", strings.Join(c.Removed, " "))
	}
	for _, name := range c.Changed {
		fmt.Fprintf(&b, "point %s changed:\n", name)
		for _, s := range config.PointSettings(running.Point(name), next.Point(name)) {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	if c.Routes {
		b.WriteString("routes changed (first match wins; - in force, + new, by position):\n")
		for _, e := range config.RoutesDiff(running.Routes, next.Routes) {
			sign := "-"
			if e.Added {
				sign = "+"
			}
			fmt.Fprintf(&b, "  %s %d: %s\n", sign, e.Index, e.Route)
		}
	}
	reload, restart := config.FileSettings(running, next)
	if len(reload) > 0 {
		b.WriteString("settings changed (apply on reload):\n")
		for _, s := range reload {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	if len(restart) > 0 {
		b.WriteString("needs a restart (a reload keeps the old value):\n")
		for _, s := range restart {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	return b.String()
}

// logWarnings logs each warning of a config that was loaded or reloaded,
// one line each, as validate prints them.
func logWarnings(log *zap.Logger, f *config.File) {
	for _, w := range f.Warnings {
		log.Warn("config warning", zap.String("warning", w.Error()))
	}
}
