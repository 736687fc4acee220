// Command mkimage writes an image tarball for the test cluster (see
// package image): either the final stage of a Dockerfile, with the files
// it copies from a build stage given as -built STAGEPATH=LOCALPATH, or a
// single static binary as entrypoint (-bin, -user).
//
//	mkimage -o sds-proxy.tar -tag sds-e2e.local/sds-proxy:e2e \
//	  -dockerfile Dockerfile -context . -built /out/sds-proxy=/tmp/sds-proxy
//	mkimage -o pause.tar -tag sds-e2e.local/pause:1 -bin /tmp/pause -user 65535:65535
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sds-proxy/sds-proxy/deploy/cluster/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

type pairs map[string]string

func (p pairs) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pairs) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q: want STAGEPATH=LOCALPATH", v)
	}
	p[k] = val
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	out := fs.String("o", "", "output tarball")
	tag := fs.String("tag", "", "image name:tag")
	dockerfile := fs.String("dockerfile", "", "Dockerfile whose final stage to follow")
	contextDir := fs.String("context", ".", "build context of -dockerfile")
	built := pairs{}
	fs.Var(built, "built", "STAGEPATH=LOCALPATH: a file a COPY --from takes (repeatable)")
	bin := fs.String("bin", "", "a static binary, the whole image: /NAME, the entrypoint")
	user := fs.String("user", "", "the image's user with -bin (UID:GID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || (*dockerfile == "") == (*bin == "") {
		return fmt.Errorf("want -o, -tag and one of -dockerfile or -bin")
	}
	var spec image.Spec
	if *dockerfile != "" {
		var err error
		if spec, err = image.FromDockerfile(*dockerfile, *contextDir, built); err != nil {
			return err
		}
	} else {
		dst := "/" + (*bin)[strings.LastIndex(*bin, "/")+1:]
		spec = image.Spec{
			Files:      []image.File{{Src: *bin, Dst: dst, Mode: 0o755}},
			Entrypoint: []string{dst},
			User:       *user,
		}
	}
	img, err := image.Build(spec)
	if err != nil {
		return err
	}
	return image.Write(img, *tag, *out)
}
