package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
)

// completion prints a shell completion script for bash or zsh, generated
// from the table of commands: the command names, each command's flags
// (read from its -h), the values a synopsis lists for a flag or an
// argument (-o text|json, bash|zsh), command names after help, and file
// names after a flag whose name says it takes a file.
func completion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "bash" && fs.Arg(0) != "zsh" {
		return cli.Usagef("completion: want one shell, bash or zsh; got %q", fs.Args())
	}
	var script strings.Builder
	if fs.Arg(0) == "zsh" {
		script.WriteString(zshPreamble)
	}
	writeBashScript(&script, completionModel())
	_, err := io.WriteString(stdout, script.String())
	return err
}

// completionCommand is what the completion scripts know of one command.
type completionCommand struct {
	Name string
	// Flags are the command's flags, "-name" each, sorted.
	Flags string
	// FileFlags are the flags whose value is a file name.
	FileFlags string
	// Valued are the flags that take a value (all but the boolean ones).
	Valued string
	// Values maps a flag to the words its value may be, from the
	// synopsis (-o text|json).
	Values map[string]string
	// Words are the arguments the synopsis lists (bash|zsh), or the
	// command names for help.
	Words string
}

// completionScript is what the scripts know of the whole program.
type completionScript struct {
	Commands []completionCommand
	// Names are the command names, space-separated.
	Names string
	// Top are the words the first argument may be besides a command:
	// the default command run's flags, and -h, --help, --version.
	Top string
}

var (
	// flagLine is a flag's line in flag.PrintDefaults: "  -name type".
	flagLine = regexp.MustCompile(`(?m)^  (-[A-Za-z0-9-]+)(?: (\S+))?`)
	// choice is a list of alternatives in a synopsis, after a flag or on
	// its own: "-o text|json", "bash|zsh".
	choice = regexp.MustCompile(`(?:^|\[|\s)(-[A-Za-z0-9-]+ )?([a-z0-9]+(?:\|[a-z0-9]+)+)`)
	// fileFlag is a flag name that says its value is a file.
	fileFlag = regexp.MustCompile(`^-(config|.*-file|.*-log)$`)
)

// completionModel reads the table of commands: each command's flags from
// the usage its -h prints.
func completionModel() completionScript {
	var s completionScript
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
		var usage bytes.Buffer
		c.run(context.Background(), []string{"-h"}, io.Discard, &usage)
		cc := completionCommand{Name: c.name, Values: map[string]string{}}
		var flags, files, valued []string
		for _, m := range flagLine.FindAllStringSubmatch(usage.String(), -1) {
			flags = append(flags, m[1])
			if m[2] != "" {
				valued = append(valued, m[1])
			}
			if m[2] == "string" && fileFlag.MatchString(m[1]) {
				files = append(files, m[1])
			}
		}
		slices.Sort(flags)
		cc.Flags, cc.FileFlags, cc.Valued = strings.Join(flags, " "), strings.Join(files, " "), strings.Join(valued, " ")
		var words []string
		for _, m := range choice.FindAllStringSubmatch(c.synopsis, -1) {
			alternatives := strings.ReplaceAll(m[2], "|", " ")
			if f := strings.TrimSpace(m[1]); f != "" {
				cc.Values[f] = alternatives
			} else {
				words = append(words, alternatives)
			}
		}
		cc.Words = strings.Join(words, " ")
		s.Commands = append(s.Commands, cc)
		if c.name == "run" {
			s.Top = cc.Flags + " -h --help --version"
		}
	}
	s.Names = strings.Join(names, " ")
	for i := range s.Commands {
		if s.Commands[i].Name == "help" {
			s.Commands[i].Words = s.Names
		}
	}
	return s
}

// writeBashScript writes the bash script for s to b: bashHead with the
// top-level words, one case per command (with a case on the previous word
// for each flag whose values the synopsis lists, in flag order), then
// bashTail. zshPreamble loads the same script through zsh's bashcompinit.
// _sds_proxy completes the word at COMP_CWORD: a command or run's flags
// first; then a flag's value (files, or the synopsis's choices), a flag of
// the command, or one of its argument words.
func writeBashScript(b *strings.Builder, s completionScript) {
	fmt.Fprintf(b, bashHead, s.Top, s.Names)
	for _, c := range s.Commands {
		fmt.Fprintf(b, "    %s)\n", c.Name)
		fmt.Fprintf(b, "        flags=\"%s\"; files=\"%s\"; valued=\"%s\"; words=\"%s\"\n", c.Flags, c.FileFlags, c.Valued, c.Words)
		if len(c.Values) > 0 {
			b.WriteString("        case \"${prev}\" in\n")
			for _, flag := range slices.Sorted(maps.Keys(c.Values)) {
				fmt.Fprintf(b, "        %s) values=\"%s\" ;;\n", flag, c.Values[flag])
			}
			b.WriteString("        esac\n")
		}
		b.WriteString("        ;;\n")
	}
	b.WriteString(bashTail)
}

// bashHead is the bash script up to the case on the command, a format
// whose two verbs are completionScript.Top and completionScript.Names.
const bashHead = `# bash completion for sds-proxy, generated by sds-proxy completion bash.
# Load it in this shell:      source <(sds-proxy completion bash)
# or for every new shell:     sds-proxy completion bash > ~/.local/share/bash-completion/completions/sds-proxy
_sds_proxy() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local cmd=run flags="" files="" valued="" words="" values=""
    COMPREPLY=()
    if [[ ${COMP_CWORD} -eq 1 ]]; then
        if [[ "${cur}" == -* ]]; then
            COMPREPLY=($(compgen -W "%s" -- "${cur}"))
        else
            COMPREPLY=($(compgen -W "%s" -- "${cur}"))
        fi
        return 0
    fi
    [[ "${COMP_WORDS[1]}" != -* ]] && cmd="${COMP_WORDS[1]}"
    case "${cmd}" in
`

// bashTail is the bash script after the case on the command: it completes
// from what the command's case set.
const bashTail = `    esac
    if [[ -n "${values}" ]]; then
        COMPREPLY=($(compgen -W "${values}" -- "${cur}"))
    elif [[ -n "${prev}" && " ${files} " == *" ${prev} "* ]]; then
        COMPREPLY=($(compgen -f -- "${cur}"))
    elif [[ -n "${prev}" && " ${valued} " == *" ${prev} "* ]]; then
        return 0
    elif [[ "${cur}" == -* ]]; then
        COMPREPLY=($(compgen -W "${flags}" -- "${cur}"))
    else
        COMPREPLY=($(compgen -W "${words}" -- "${cur}"))
    fi
    return 0
}
complete -o default -F _sds_proxy sds-proxy
`

// zshPreamble comes before the bash script in the zsh script: it runs the
// bash script under zsh's bash completion emulation.
const zshPreamble = `# zsh completion for sds-proxy, generated by sds-proxy completion zsh.
# Load it from ~/.zshrc:      source <(sds-proxy completion zsh)
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }
autoload -U +X bashcompinit && bashcompinit
`
