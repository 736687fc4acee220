package admin

import (
	"net/http"
	"strconv"
)

// ConfigPathHeader names the response header of GET /config that carries
// the path of the config file in force, as the proxy was given it.
const ConfigPathHeader = "Sds-Config-Path"

// config serves GET /config: the raw bytes of the config file in force,
// as application/yaml, never cached, with the file's path in
// ConfigPathHeader. Without a config file (a proxy run from -upstream
// alone, or no Options.Config) it answers 404 with a plain-text reason,
// so that a client tells "no file" from an empty one.
func (a *server) config(w http.ResponseWriter, r *http.Request) {
	var path string
	var raw []byte
	if a.opts.Config != nil {
		path, raw = a.opts.Config()
	}
	if raw == nil {
		plainText(w, http.StatusNotFound, "no config file: this proxy runs from its command line (-upstream) alone\n")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	h.Set(ConfigPathHeader, path)
	w.Write(raw)
}
