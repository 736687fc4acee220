package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/sds-proxy/sds-proxy/cmd/internal/adminclient"
	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/cmd/internal/demo"
	"github.com/sds-proxy/sds-proxy/cmd/internal/inject"
	"github.com/sds-proxy/sds-proxy/cmd/internal/injector"
	"github.com/sds-proxy/sds-proxy/internal/editdist"
)

// command is one subcommand of sds-proxy: a row of commands.
type command struct {
	name string
	// synopsis is the command line after "sds-proxy NAME", as the usage
	// line shows it.
	synopsis string
	// summary says in one line what the command does, for the command
	// list of sds-proxy help.
	summary string
	// run runs the command on the arguments after its name. It parses
	// them with parseFlags, or hands its package a flag set from flagSet,
	// so that "NAME -h" prints the usage and nothing else happens.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the table of subcommands, in the order help lists them. It
// is the one place a subcommand is declared: dispatch, help, the usage of
// each command's -h and the shell completion scripts all read it.
func commands() []command {
	return []command{
		{"run", "[-config sds.yaml] [-listen ADDR] [-upstream URL] [-admin ADDR]",
			"run the proxy (the default: sds-proxy -config F is sds-proxy run -config F)",
			func(ctx context.Context, args []string, _, stderr io.Writer) error {
				return runProxy(ctx, args, stderr, nil)
			}},
		{"validate", "[-config sds.yaml] [-upstream URL] [-o text|json] [-diff ADMIN_ADDR] [-timeout 5s]",
			"check a config file without starting anything (-diff: against a running proxy)",
			validate},
		{"schema", "", "print the JSON Schema of sds.yaml, for editors (docs/sds.schema.json is a copy)",
			schema},
		{"status", "[-admin 127.0.0.1:9901 | -config sds.yaml] [-o table|json] [-timeout 5s]",
			"print the state of a running proxy's points, read from its admin port",
			func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return adminclient.Status(ctx, flagSet("status", stderr), args, stdout)
			}},
		{"force", "POINT degrade|pass|clear [-ttl 10m] [-reason TEXT] [-admin 127.0.0.1:9901] [-token-file F] [-timeout 5s]",
			"degrade or pass every request of a running proxy's point for a while (or clear that switch)",
			func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return adminclient.Force(ctx, flagSet("force", stderr), args, stdout)
			}},
		{"suggest", "-access-log FILE [-config sds.yaml]",
			"propose thresholds (a points: block, each value explained) from the proxy's access log",
			suggestCmd},
		{"replay", "-config CANDIDATE.yaml [-o text|json] [-assume-neighbours] [-horizon 1m] LOG... (- reads stdin)",
			"replay the proxy's access log through a candidate config: what it would degrade, and when",
			replayCmd},
		{"demo", "[-config FILE] [-listen ADDR] [-admin ADDR] [-upstream-listen ADDR]",
			"run the proxy on the built-in example in front of a demo service",
			func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return demo.Run(ctx, flagSet("demo", stderr), args, stdout,
					func(ctx context.Context, args []string, onServing func(proxyAddr, adminAddr string)) error {
						return runProxy(ctx, args, stderr, onServing)
					})
			}},
		{"inject", "-image IMAGE [-configmap NAME] [-upstream-port N] [-service-target] [-legacy-sidecar] [-proxy-port 8080] [-admin-port 9901] < in.yaml > out.yaml",
			"add the sds-proxy sidecar to the Kubernetes workloads read on stdin",
			func(_ context.Context, args []string, stdout, stderr io.Writer) error {
				return inject.Run(flagSet("inject", stderr), args, os.Stdin, stdout)
			}},
		{"injector", "-image IMAGE [-namespace NS] [-listen 0.0.0.0:9443] [-health 0.0.0.0:9902] [-configmap NAME] [-tls-cert F -tls-key F]",
			"run the admission webhook that injects the sidecar into the pods of labelled namespaces",
			func(ctx context.Context, args []string, _, stderr io.Writer) error {
				return injector.Run(ctx, flagSet("injector", stderr), args, versionString())
			}},
		{"completion", "bash|zsh", "print a shell completion script: source <(sds-proxy completion bash)", completion},
		{"version", "", "print the version and the Go version (also --version)", printVersion},
		{"help", "[COMMAND]", "list the commands, or show one command's flags (also -h, --help)", help},
	}
}

// lookup returns the command named name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run dispatches a command line to its command; with none, or with flags
// first, the command is run. -h, -help and --help are help; -version and
// --version are version. A command's -h is not an error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name := "run"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			name, args = "help", args[1:]
		case "-version", "--version":
			name, args = "version", args[1:]
		default:
			if !strings.HasPrefix(args[0], "-") {
				name, args = args[0], args[1:]
			}
		}
	}
	c, ok := lookup(name)
	if !ok {
		return unknownCommand(name)
	}
	err := c.run(ctx, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// unknownCommand is the usage error of a command line whose command is
// not one: it names the command meant (closestCommand), or else says where
// the commands are listed.
func unknownCommand(name string) error {
	if meant, ok := closestCommand(name); ok {
		return cli.Usagef("unknown command %q; did you mean %q?", name, meant)
	}
	return cli.Usagef("unknown command %q; sds-proxy help lists the commands", name)
}

// closestCommand returns the command whose name is fewest edits from name
// (insertions, deletions and substitutions of one byte: the Levenshtein
// distance), the first in the table on a tie. It finds none (false) when
// even the closest is more than 1 edit away for a name of up to 5 bytes,
// or more than 2 for a longer one: a suggestion past that is a guess.
func closestCommand(name string) (string, bool) {
	limit := 1
	if len(name) > 5 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range commands() {
		if d := editdist.Distance(name, c.name); d < bestDist {
			best, bestDist = c.name, d
		}
	}
	return best, best != ""
}

// parseFlags parses a command's flags with cli.Parse, the usage of -h and
// of a wrong flag being the command's (printUsage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.Usage = func() { printUsage(fs) }
	return cli.Parse(fs, args)
}

// flagSet returns the flag set of the command named name, for a command
// whose package parses its own flags: problems and the usage go to
// stderr, and the usage is the command's (printUsage).
func flagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs) }
	return fs
}

// printUsage prints the usage of the command whose flag set is fs: its
// usage line, its summary, and its flags with their defaults.
func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	c, _ := lookup(fs.Name())
	fmt.Fprintf(w, "usage: %s\n\n%s\n", strings.TrimSpace("sds-proxy "+c.name+" "+c.synopsis), c.summary)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nflags:")
		fs.PrintDefaults()
	}
}

// printVersion is the version command.
func printVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("version: unexpected arguments %q", fs.Args())
	}
	_, err := fmt.Fprintf(stdout, "sds-proxy %s %s\n", versionString(), runtime.Version())
	return err
}

// help prints the list of commands, or with an operand that command's
// usage (as COMMAND -h does), to stdout.
func help(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("help", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return cli.Usagef("help: unexpected arguments %q; give one command", fs.Args())
	}
	if fs.NArg() == 0 {
		return writeHelp(stdout)
	}
	c, ok := lookup(fs.Arg(0))
	if !ok {
		return cli.Usagef("help: %v", unknownCommand(fs.Arg(0)))
	}
	return c.run(ctx, []string{"-h"}, stdout, stdout)
}

// writeHelp writes the list of commands, one line each, and the exit
// codes.
func writeHelp(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`sds-proxy: a sidecar reverse proxy that degrades service points when they
trip a threshold (timeouts, errors, visits, concurrency, a token bucket), as
Didi's SDS does. The whole contract is in the docs/ folder of
https://github.com/sds-proxy/sds-proxy (its README links each page).

usage: sds-proxy [COMMAND] [FLAGS]     (run when no command is given)

commands:
`)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	b.WriteString(`
sds-proxy help COMMAND, or sds-proxy COMMAND -h, shows a command's flags.

exit codes:
  0  success (validate: the config is valid, warnings or not)
  1  an invalid config, or a failure while running
  2  a wrong command line: unknown command, flag or argument
`)
	_, err := io.WriteString(w, b.String())
	return err
}
