// Package editdist measures how far apart two words are, for the "did you
// mean" of a misspelt name (a config key, a command).
package editdist

// Distance is the Levenshtein distance between a and b: the fewest
// insertions, deletions and substitutions of one byte that turn a into b.
// It is 0 for equal strings and len(b) for an empty a. It takes time
// proportional to len(a)*len(b) and allocates two rows of len(b)+1 ints:
// callers bound the lengths of what they compare.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
