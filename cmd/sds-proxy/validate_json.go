package main

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/config"
)

// validation is what validate -o json prints: whether the file is valid,
// and its problems, warnings included, in the order of the text output.
type validation struct {
	// Valid is true when the file loads (it may have warnings).
	Valid bool `json:"valid"`
	// Problems is every problem; [] when there is none.
	Problems []problem `json:"problems"`
}

// problem is one problem of a config file.
type problem struct {
	// File is the config file's path as given, or the flag ("-upstream")
	// whose value is wrong.
	File string `json:"file"`
	// Line and Column are 1-based; 0 when the problem has no position (a
	// flag, a file that cannot be read). Column is 1 for a YAML syntax
	// error, whose column the YAML parser does not report.
	Line   int `json:"line"`
	Column int `json:"column"`
	// Message says what is wrong and what to write instead.
	Message string `json:"message"`
	// Warning marks a problem that does not make the file invalid.
	Warning bool `json:"warning"`
}

// writeProblems writes the outcome of loading the config at path (f, or
// err) as an indented validation document, and returns cli.ErrInvalid when
// the file is invalid, so that the exit code is the text output's.
func writeProblems(w io.Writer, path string, f *config.File, err error) error {
	v := validation{Valid: err == nil, Problems: []problem{}}
	var errs config.Errors
	switch {
	case err == nil:
		errs = f.Warnings
	case !errors.As(err, &errs):
		errs = config.Errors{{File: path, Msg: err.Error()}}
	}
	for _, e := range errs {
		v.Problems = append(v.Problems, problem{File: e.File, Line: e.Line, Column: e.Col, Message: e.Msg, Warning: e.Warning})
	}
	out, marshalErr := json.MarshalIndent(v, "", "  ")
	if marshalErr != nil {
		return marshalErr
	}
	if _, writeErr := w.Write(append(out, '\n')); writeErr != nil {
		return writeErr
	}
	if err != nil {
		return cli.ErrInvalid
	}
	return nil
}
