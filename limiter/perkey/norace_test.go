//go:build !race

package perkey

// churnSteps is how many churning keys the churn tests send (race_test.go).
const churnSteps = 200_000
