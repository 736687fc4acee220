package main
import (
 _ "github.com/caddyserver/certmagic"
 _ "gopkg.in/yaml.v3"
 _ "go.uber.org/zap"
 _ "github.com/fsnotify/fsnotify"
 _ "github.com/prometheus/client_golang/prometheus"
)
func main(){}
