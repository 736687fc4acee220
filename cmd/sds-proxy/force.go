package main

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
	"strings"
	"time"
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

// force sets or clears a point's switch on a running proxy through its
// admin port (docs/admin.md, "Runtime switches"): POST or DELETE
// /points/{name}/force with the token of -token-file. It prints the
// switch as the proxy answered it.
func force(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseForceFlags(args, stderr)
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
	answer, err := sendAdmin(ctx, f.base, method, "/points/"+url.PathEscape(f.point)+"/force", token, body, f.timeout)
	if err != nil {
		return err
	}
	var sw struct {
		Point, Action, Reason string
		Since, Until          time.Time
	}
	if err := json.Unmarshal(answer, &sw); err != nil {
		return fmt.Errorf("admin port at %s: the answer is not a switch: %w", f.base, err)
	}
	if f.action == "clear" {
		_, err = fmt.Fprintf(stdout, "%s: %s switch cleared (it was set %s: %s)\n", cell(sw.Point), cell(sw.Action),
			sw.Since.Format(time.RFC3339), cell(sw.Reason))
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: %s until %s (%s): %s\n", cell(sw.Point), cell(sw.Action), sw.Until.Format(time.RFC3339),
		sw.Until.Sub(sw.Since), cell(sw.Reason))
	return err
}

// parseForceFlags parses force's command line, whose operands (POINT and
// degrade, pass or clear) may come before, between or after the flags.
// A wrong one is errUsage after the reason and the usage went to stderr;
// -h prints the usage and returns zero flags.
func parseForceFlags(args []string, stderr io.Writer) (forceFlags, error) {
	fs := flag.NewFlagSet("force", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ttl := fs.Duration("ttl", 0, "how long the switch lasts, up to 24h (degrade and pass)")
	reason := fs.String("reason", "", "why, shown in /status and the logs (degrade and pass)")
	addr := fs.String("admin", defaultAdmin, "admin port: host:port or http://host:port")
	tokenFile := fs.String("token-file", os.Getenv(tokenFileEnv), "file holding the proxy's bearer token (its adminTokenFile); default $"+tokenFileEnv)
	timeout := fs.Duration("timeout", 5*time.Second, "give up on the admin port after this long")
	var operands []string
	for {
		if err := parseFlags(fs, args); err != nil {
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
	base, err := adminURL(*addr)
	f.base = base
	if problems := forceProblems(operands, f, err); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "sds-proxy force:", p)
		}
		fs.Usage()
		return forceFlags{}, errUsage
	}
	f.point, f.action = operands[0], operands[1]
	return f, nil
}

// forceProblems returns everything wrong with force's command line, so
// that one try names every missing flag: the operands (a point and
// degrade, pass or clear), adminErr (what adminURL said of -admin, or
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

// sendAdmin sends method path with body (JSON; none when nil) and the
// bearer token to the admin port at base, within timeout, and returns the
// body of a 200 answer. Any other outcome is an error naming the address,
// the answer's status and its first line. It ignores HTTP_PROXY and the
// like: the admin port is reached directly.
func sendAdmin(ctx context.Context, base, method, path string, token, body []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("admin port at %s: %w", base, err)
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v", timeout)
		}
		return nil, fmt.Errorf("admin port at %s cannot be reached: %s %s: %w", base, method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("admin port at %s: %s %s: reading the answer: %w", base, method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			hint = " (the token is not the proxy's: check -token-file against its adminTokenFile)"
		case http.StatusNotFound:
			if strings.HasPrefix(string(answer), "404 page not found") {
				hint = " (the proxy has no adminTokenFile: its switches are off)"
			}
		}
		return nil, fmt.Errorf("admin port at %s: %s %s answered %s%s%s", base, method, path, resp.Status, firstLine(answer), hint)
	}
	return answer, nil
}
