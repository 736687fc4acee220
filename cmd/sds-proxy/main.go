// Command sds-proxy is a sidecar reverse proxy that enforces service
// degradation in the manner of Didi's SDS. The contract is in docs/ (the
// README links each page); `sds-proxy demo` runs it in front of a
// built-in demo service.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
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

// main runs the command line and turns its error into the exit code
// (sds-proxy help, exit codes): 0, 1 for an invalid config or a failure,
// 2 for a wrong command line.
func main() {
	quietRedis()
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, cli.ErrInvalid):
		os.Exit(1)
	case errors.Is(err, cli.ErrUsage):
		if err != cli.ErrUsage { // a bare one has printed why already
			fmt.Fprintln(os.Stderr, "sds-proxy:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sds-proxy:", err)
		os.Exit(1)
	}
}
