package cli_test

import (
	"fmt"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
)

// ExampleLoopback turns the addresses a config listens on into the ones
// a command beside the proxy reaches.
func ExampleLoopback() {
	for _, addr := range []string{"0.0.0.0:9901", "[::]:8080", ":9000", "10.0.0.7:9901"} {
		fmt.Println(cli.Loopback(addr))
	}
	// Output:
	// 127.0.0.1:9901
	// 127.0.0.1:8080
	// 127.0.0.1:9000
	// 10.0.0.7:9901
}
