package proxy

import (
	"net/http"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/route"
)

// Route maps the requests its Rule matches to a point. Build it with
// NewRoute, which puts the rule's paths in normal form.
type Route struct {
	route.Rule
	// Point is the point of the requests the route matches; nil forwards
	// them unprotected.
	Point *Point
	// Priority is the priority of the requests the route matches, which
	// the point's limiter judges them by (limiter.Request); the zero
	// Priority is limiter.PriorityDefault.
	Priority limiter.Priority
}

// NewRoute returns r with its rule in normal form (route.Normalize), so
// that a route matches whichever spelling of its path the user wrote. It
// fails on a path no request could match.
func NewRoute(r Route) (Route, error) {
	rule, err := route.Normalize(r.Rule)
	if err != nil {
		return Route{}, err
	}
	r.Rule = rule
	return r, nil
}

// routeTable is Routes compiled (route.Table), with the routes it indexes.
type routeTable struct {
	routes []Route
	table  *route.Table
}

// newRouteTable compiles routes, which it keeps and never changes.
func newRouteTable(routes []Route) routeTable {
	rules := make([]route.Rule, len(routes))
	for i := range routes {
		rules[i] = routes[i].Rule
	}
	return routeTable{routes: routes, table: route.NewTable(rules)}
}

// find returns the first route that matches r, whose routed path is path
// (route.RequestPath), or nil.
func (t routeTable) find(r *http.Request, path string) *Route {
	if i := t.table.Find(r, path); i >= 0 {
		return &t.routes[i]
	}
	return nil
}
