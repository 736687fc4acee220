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

// errUsage ends a command whose command line was wrong: main exits 2. A
// bare errUsage has printed why already (the flag package does); one
// wrapped by usageErrorf carries the reason, which main prints.
var errUsage = errors.New("usage")

// main runs the command line and turns its error into the exit code
// (sds-proxy help, exit codes): 0, 1 for an invalid config or a failure,
// 2 for a wrong command line.
func main() {
	quietRedis()
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errInvalid):
		os.Exit(1)
	case errors.Is(err, errUsage):
		if err != errUsage {
			fmt.Fprintln(os.Stderr, "sds-proxy:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sds-proxy:", err)
		os.Exit(1)
	}
}
