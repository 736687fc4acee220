package config_test

import (
	"fmt"
	"log"

	"github.com/sds-proxy/sds-proxy/config"
)

func ExampleLoad() {
	f, err := config.Load("../sds.yaml", config.Options{Listen: "127.0.0.1:18080"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Listen, f.Upstream)
	for _, p := range f.Points {
		fmt.Printf("%s visit=%v shadow=%v\n", p.Name, p.VisitThreshold, p.Shadow)
	}
	// Output:
	// 127.0.0.1:18080 http://127.0.0.1:9000
	// orders.read visit=20 shadow=false
	// orders.create visit=off shadow=false
	// slow visit=off shadow=false
	// flaky visit=off shadow=false
	// everything-else visit=100 shadow=true
}

func ExampleParse() {
	_, err := config.Parse("sds.yaml", []byte(`upstream: http://127.0.0.1:9000
routes:
  - point: orders.read
    match: {pathPrefix: /api/orders}
points:
  orders.read:
    timeoutCountThreshold: 5
    visitThreshold: lots
`), config.Options{})
	// What `sds-proxy validate` prints: one problem a line.
	fmt.Println(err)
	// Output:
	// sds.yaml:7:5: timeoutCountThreshold is set but timeoutThreshold is not: no call is ever counted as a timeout; add timeoutThreshold: 250ms or remove timeoutCountThreshold
	// sds.yaml:8:21: visitThreshold: want an integer, got the string "lots"
}

func ExampleDefault() {
	f, err := config.Default(config.Options{Upstream: "http://127.0.0.1:9000"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Listen, f.Admin, len(f.Points))
	// Output: 0.0.0.0:8080 0.0.0.0:9901 0
}

func ExampleDiff() {
	const before = `upstream: http://127.0.0.1:9000
routes: [{point: a, match: {}}]
points: {a: {visitThreshold: 10}}
`
	const after = `upstream: http://127.0.0.1:9000
listen: 0.0.0.0:8081
routes: [{point: a, match: {path: /a}}, {point: b, match: {}}]
points: {a: {visitThreshold: 20}, b: {concurrentThreshold: 8}}
`
	old, err := config.Parse("sds.yaml", []byte(before), config.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cur, err := config.Parse("sds.yaml", []byte(after), config.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(config.Diff(old, cur))
	// Output: points added [b], changed [a]; routes changed; needs restart [listen]
}
