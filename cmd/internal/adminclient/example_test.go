package adminclient_test

import (
	"fmt"

	"github.com/sds-proxy/sds-proxy/cmd/internal/adminclient"
)

// ExampleURL turns -admin into the admin port's base URL.
func ExampleURL() {
	for _, addr := range []string{"127.0.0.1:9901", "https://admin.internal:8443/sds/", "ftp://host:21"} {
		base, err := adminclient.URL(addr)
		fmt.Printf("%q %v\n", base, err)
	}
	// Output:
	// "http://127.0.0.1:9901" <nil>
	// "https://admin.internal:8443/sds" <nil>
	// "" -admin "ftp://host:21": want host:port or http://host:port
}
