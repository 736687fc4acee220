package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a config, at a position in its file.
type Error struct {
	// File is the config file's path, or the flag ("-upstream") whose value
	// is wrong.
	File string
	// Line and Col are 1-based; 0 when the problem has no position (a flag,
	// a file that cannot be read). Col is 1 for YAML syntax errors, whose
	// column the parser does not report.
	Line, Col int
	// Msg says what is wrong and what to write instead.
	Msg string
	// Warning marks a problem that does not reject the config: the file
	// loads and reloads, and the problem is kept in File.Warnings.
	Warning bool
}

// Error formats the problem as FILE:LINE:COL: message, or FILE: message
// when it has no position; a warning's message starts with "warning: ".
func (e Error) Error() string {
	msg := e.Msg
	if e.Warning {
		msg = "warning: " + msg
	}
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, msg)
	case e.File != "":
		return e.File + ": " + msg
	}
	return msg
}

// Errors is every problem found in one config, sorted by position. Parse
// returns it as its error, warnings included, when the config has errors;
// File.Warnings holds the warnings of a config without errors.
type Errors []Error

// Error formats one problem per line, in order.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns each problem, for errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sort orders the problems by line, column and message; problems without a
// position come first.
func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col), strings.Compare(a.Msg, b.Msg))
	})
}

// pos is a position in the file, 1-based.
type pos struct{ line, col int }

// loc names a key of the file for the position table: a top-level key
// ("tls.acme.domains"), a key of route number route (1-based), or a key of
// point point. field "" names the route or point itself.
type loc struct {
	point string
	route int
	field string
}

// problems gathers Errors for one file: errors, which reject it, and
// warnings, which do not.
type problems struct {
	file  string
	errs  Errors
	warns Errors
}

func (p *problems) add(at pos, format string, args ...any) {
	p.errs = append(p.errs, Error{File: p.file, Line: at.line, Col: at.col, Msg: fmt.Sprintf(format, args...)})
}

// warn records a problem that does not reject the file.
func (p *problems) warn(at pos, format string, args ...any) {
	p.warns = append(p.warns, Error{File: p.file, Line: at.line, Col: at.col, Msg: fmt.Sprintf(format, args...), Warning: true})
}

// warnings returns the gathered warnings, sorted, or nil.
func (p *problems) warnings() Errors {
	if len(p.warns) == 0 {
		return nil
	}
	p.warns.sort()
	return p.warns
}

// flag records a problem with a command-line flag's value.
func (p *problems) flag(name, format string, args ...any) {
	p.errs = append(p.errs, Error{File: "-" + name, Msg: fmt.Sprintf(format, args...)})
}

// err returns the gathered problems, warnings included, sorted, or nil
// when there is no error.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	all := append(p.errs, p.warns...)
	all.sort()
	return all
}
