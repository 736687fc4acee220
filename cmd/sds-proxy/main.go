// Command sds-proxy is a sidecar reverse proxy that enforces service
// degradation in the manner of Didi's SDS. See the README for the
// contract; `sds-proxy demo` runs it in front of a built-in demo service.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version is stamped at build time with -ldflags "-X main.version=..."
// (it must stay a constant string for -X to set it); versionString is
// what the binary reports.
var version = "dev"

// versionString returns the stamped version, or else the module version
// that `go install github.com/sds-proxy/sds-proxy/cmd/sds-proxy@v1.2.3`
// records in the binary, or else "dev" (a build from a checkout).
func versionString() string { return moduleVersion(version, debug.ReadBuildInfo) }

// moduleVersion returns stamped when a build stamped it (anything but
// "dev"), else the main module's version from readBuildInfo, else "dev".
func moduleVersion(stamped string, readBuildInfo func() (*debug.BuildInfo, bool)) string {
	if stamped != "dev" {
		return stamped
	}
	if bi, ok := readBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return stamped
}

// errInvalid ends a command that has already printed why it failed
// (validate's problem list), so main exits 1 without printing more.
var errInvalid = errors.New("invalid")

// errUsage ends a command whose command line was wrong, after it printed
// why (status): main exits 2.
var errUsage = errors.New("usage")

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errInvalid):
		os.Exit(1)
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sds-proxy:", err)
		os.Exit(1)
	}
}

// run dispatches a command line: run (the default), validate, status,
// demo, inject, version.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runProxy(ctx, args, stderr, nil)
	case "validate":
		return validate(ctx, args, stdout, stderr)
	case "status":
		return status(ctx, args, stdout, stderr)
	case "demo":
		return demo(ctx, args, stdout, stderr)
	case "inject":
		return inject(args, os.Stdin, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "sds-proxy %s %s\n", versionString(), runtime.Version())
		return nil
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

const usage = `usage:
  sds-proxy [run] [-config sds.yaml] [-listen ADDR] [-upstream URL] [-admin ADDR]
  sds-proxy validate [-config sds.yaml] [-diff ADMIN_ADDR]
  sds-proxy status [-admin 127.0.0.1:9901] [-o table|json] [-timeout 5s]
  sds-proxy demo [-config sds.yaml]
  sds-proxy inject -image IMAGE [-configmap NAME] [-upstream-port N] [-service-target] [-legacy-sidecar] < in.yaml > out.yaml
  sds-proxy version
`
