package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// tokenFileEnv names the environment variable that gives force's
// -token-file when the flag is not set.
const tokenFileEnv = "SDS_ADMIN_TOKEN_FILE"

// forceFlags are force's command line.
type forceFlags struct {
	point, action string // action: degrade, pass or clear
	ttl           time.Duration
	reason        string
	base          string // the admin port's base URL
	tokenFile     string
	timeout       time.Duration
}

// Force is `sds-proxy force`: it sets or clears a point's switch on a
// running proxy through its admin port (docs/admin.md, "Runtime
// switches"): POST or DELETE /points/{name}/force with the token of
// -token-file. It prints the switch as the proxy answered it. fs is the
// command's flag set, which main made: its output takes the problems of a
// wrong command line (cli.ErrUsage) and the usage.
func Force(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	f, err := parseForceFlags(fs, args)
	if err != nil || f.point == "" {
		return err // -h asked for the usage: point is unset
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	method, body := http.MethodPost, []byte(nil)
	if f.action == "clear" {
		method = http.MethodDelete
	} else {
		body, _ = json.Marshal(map[string]string{"action": f.action, "ttl": f.ttl.String(), "reason": f.reason})
	}
	answer, _, err := roundTrip(ctx, request{base: f.base, method: method, path: "/points/" + url.PathEscape(f.point) + "/force",
		token: token, body: body, limit: maxSwitchBody, hint: switchHint}, f.timeout)
	if err != nil {
		return err
	}
	var sw admin.Switch
	if err := json.Unmarshal(answer, &sw); err != nil {
		return fmt.Errorf("admin port at %s: the answer is not a switch: %w", f.base, err)
	}
	if f.action == "clear" {
		_, err = fmt.Fprintf(stdout, "%s: %s switch cleared (it was set %s: %s)\n", Cell(sw.Point), Cell(sw.Action),
			sw.Since.Format(time.RFC3339), Cell(sw.Reason))
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: %s until %s (%s): %s\n", Cell(sw.Point), Cell(sw.Action), sw.Until.Format(time.RFC3339),
		sw.Until.Sub(sw.Since), Cell(sw.Reason))
	return err
}

// parseForceFlags parses force's command line with fs; its operands
// (POINT and degrade, pass or clear) may come before, between or after
// the flags. A wrong one is cli.ErrUsage after the reason and the usage
// went to fs.Output(); -h prints the usage and returns zero flags.
func parseForceFlags(fs *flag.FlagSet, args []string) (forceFlags, error) {
	ttl := fs.Duration("ttl", 0, "how long the switch lasts, up to 24h (degrade and pass)")
	reason := fs.String("reason", "", "why, shown in /status and the logs (degrade and pass)")
	addr := fs.String("admin", DefaultAdmin, "admin port: host:port or http://host:port")
	tokenFile := fs.String("token-file", os.Getenv(tokenFileEnv), "file holding the proxy's bearer token (its adminTokenFile); default $"+tokenFileEnv)
	timeout := fs.Duration("timeout", 5*time.Second, "give up on the admin port after this long")
	var operands []string
	for {
		if err := cli.Parse(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return forceFlags{}, nil
			}
			return forceFlags{}, err
		}
		if fs.NArg() == 0 {
			break
		}
		operands = append(operands, fs.Arg(0))
		args = fs.Args()[1:]
	}
	f := forceFlags{ttl: *ttl, reason: *reason, tokenFile: *tokenFile, timeout: *timeout}
	base, err := URL(*addr)
	f.base = base
	if problems := forceProblems(operands, f, err); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(fs.Output(), "sds-proxy force:", p)
		}
		fs.Usage()
		return forceFlags{}, cli.ErrUsage
	}
	f.point, f.action = operands[0], operands[1]
	return f, nil
}

// forceProblems returns everything wrong with force's command line, so
// that one try names every missing flag: the operands (a point and
// degrade, pass or clear), adminErr (what URL said of -admin, or
// nil), and f's flags. -ttl and -reason are asked of degrade and pass
// only, and only once the action is known.
func forceProblems(operands []string, f forceFlags, adminErr error) []error {
	var problems []error
	action := ""
	switch {
	case len(operands) != 2:
		problems = append(problems, fmt.Errorf("want a point and degrade, pass or clear; got %q", operands))
	case operands[1] != "degrade" && operands[1] != "pass" && operands[1] != "clear":
		problems = append(problems, fmt.Errorf("%q: want degrade, pass or clear", operands[1]))
	default:
		action = operands[1]
	}
	if action == "degrade" || action == "pass" {
		if f.ttl <= 0 {
			problems = append(problems, errors.New("-ttl: give how long the switch lasts, such as -ttl 10m (at most 24h)"))
		}
		if f.reason == "" {
			problems = append(problems, errors.New("-reason: say why, for whoever reads /status and the logs"))
		}
	}
	if f.tokenFile == "" {
		problems = append(problems, fmt.Errorf("-token-file: give the file holding the proxy's token (its adminTokenFile), or set $%s", tokenFileEnv))
	}
	if adminErr != nil {
		problems = append(problems, adminErr)
	}
	if f.timeout <= 0 {
		problems = append(problems, fmt.Errorf("-timeout %v: want a positive duration", f.timeout))
	}
	return problems
}

// readToken reads a bearer token file as the proxy does: its content
// without surrounding white space.
func readToken(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-token-file: %w", err)
	}
	token := bytes.TrimSpace(data)
	if len(token) == 0 {
		return nil, fmt.Errorf("-token-file: %s is empty", path)
	}
	return token, nil
}

// switchHint explains the force endpoints' refusals that a wrong setup
// causes: a token that is not the proxy's, or a proxy without switches.
func switchHint(status int, answer []byte) string {
	switch {
	case status == http.StatusUnauthorized:
		return " (the token is not the proxy's: check -token-file against its adminTokenFile)"
	case status == http.StatusNotFound && bytes.HasPrefix(answer, []byte("404 page not found")):
		return " (the proxy has no adminTokenFile: its switches are off)"
	}
	return ""
}
