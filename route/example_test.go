package route_test

import (
	"errors"
	"fmt"

	"github.com/sds-proxy/sds-proxy/route"
)

// A rule's paths are put in normal form once, when the table is built; a
// path no request could ever match is refused, with where it breaks.
func ExampleNormalize() {
	r, err := route.Normalize(route.Rule{PathPrefix: "/api//orders/./"})
	fmt.Printf("%q %v\n", r.PathPrefix, err)

	_, err = route.Normalize(route.Rule{Path: "/files/a%2Fb"})
	var bad *route.PathError
	if errors.As(err, &bad) {
		fmt.Printf("%v (at byte %d: %s)\n", bad.Err, bad.Offset, bad.Path[bad.Offset:bad.Offset+3])
	}
	// Output:
	// "/api/orders/" <nil>
	// the path contains an encoded slash (%2F) (at byte 8: %2F)
}

// Covers tells whether a rule listed after another can ever be the first
// match.
func ExampleCovers() {
	api := route.Rule{PathPrefix: "/api", Host: "shop.example"}
	fmt.Println(route.Covers(api, route.Rule{Methods: []string{"POST"}, Path: "/api/orders", Host: "SHOP.example:8443"}))
	fmt.Println(route.Covers(api, route.Rule{Path: "/api-docs", Host: "shop.example"}))
	fmt.Println(route.Covers(api, route.Rule{PathPrefix: "/api"}))
	// Output:
	// true
	// false
	// false
}
