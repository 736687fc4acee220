package main

import (
	"flag"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
)

// validate checks a config file without starting anything: its warnings
// as FILE:LINE:COL: warning: message and "OK", or every problem (warnings
// included) as FILE:LINE:COL: message and errInvalid. Warnings alone do
// not fail it.
func validate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "sds.yaml", "config file to check")
	upstream := fs.String("upstream", "", "upstream URL, as given to run (when the file has none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("validate: unexpected arguments %q", fs.Args())
	}
	f, err := config.Load(*path, config.Options{Upstream: *upstream})
	if err != nil {
		fmt.Fprintln(stdout, err)
		return errInvalid
	}
	if len(f.Warnings) > 0 {
		fmt.Fprintln(stdout, f.Warnings)
	}
	fmt.Fprintln(stdout, "OK")
	return nil
}

// logWarnings logs each warning of a config that was loaded or reloaded,
// one line each, as validate prints them.
func logWarnings(log *zap.Logger, f *config.File) {
	for _, w := range f.Warnings {
		log.Warn("config warning", zap.String("warning", w.Error()))
	}
}
