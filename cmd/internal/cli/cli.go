// Package cli is what sds-proxy's commands share with its main: the
// errors that choose the exit code, the flag parsing that returns them,
// and the address a command reaches a listener at from beside it.
// Package main keeps the command table; each command's package takes the
// flag set main made for it, whose Usage prints the table's synopsis.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"net"
)

// ErrInvalid ends a command that has already printed why it failed (a
// config's problem list, inject's refusals): main exits 1 and prints
// nothing more.
var ErrInvalid = errors.New("invalid")

// ErrUsage ends a command whose command line was wrong: main exits 2. A
// bare ErrUsage has printed why already (the flag package does); one made
// by Usagef carries the reason, which main prints.
var ErrUsage = errors.New("usage")

// usageError is a wrong command line and its reason.
// errors.Is(usageError(...), ErrUsage) holds.
type usageError string

func (e usageError) Error() string        { return string(e) }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns a wrong command line's error with its reason, for main
// to print before it exits 2.
func Usagef(format string, args ...any) error {
	return usageError(fmt.Sprintf(format, args...))
}

// Parse parses a command's flags from args; the caller checks the
// operands left (fs.Args). On -h the flag set prints its usage and Parse
// returns flag.ErrHelp, which main turns into success. A wrong flag
// prints the reason and the usage and returns ErrUsage.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return ErrUsage // the flag package printed why, and the usage
	}
	return err
}

// Loopback turns a wildcard listen address into one a command on the same
// machine can reach and other machines cannot: 0.0.0.0, :: and no host
// become 127.0.0.1. Any other address is returned as it is.
func Loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "0.0.0.0" && host != "::" && host != "") {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}
