package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sds-proxy/sds-proxy/config"
)

// validate checks a config file without starting anything: "OK", or every
// problem as FILE:LINE:COL: message and errInvalid.
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
	if _, err := config.Load(*path, config.Options{Upstream: *upstream}); err != nil {
		fmt.Fprintln(stdout, err)
		return errInvalid
	}
	fmt.Fprintln(stdout, "OK")
	return nil
}
