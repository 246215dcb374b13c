package permission

// match is the outcome of checking one rule against one call.
type match int

const (
	// noMatch: the rule does not apply.
	noMatch match = iota
	// maybeMatch: the rule might apply, depending on what is only known at
	// run time. Deny and ask rules treat it as a reason to ask; allow rules
	// as no match.
	maybeMatch
	// fullMatch: the rule applies.
	fullMatch
)

// Symbols of a match string. Characters are runes >= 0; these are not.
const (
	symUnknown  rune = -1 // subject: text only known at run time
	symWildcard rune = -2 // pattern: "*"
	// symWordSpace stands for a space inside one word, so that it never
	// matches the space between two words.
	symWordSpace rune = 0
)

// maxMatchCells bounds the work of one glob match; larger problems are
// answered "maybe", which is safe for every kind of rule.
const maxMatchCells = 4 << 20

// globMatch matches pattern against subject. "*" in pattern matches any
// sequence. With unknownIsAny, an unknown piece of subject may stand for
// any text; without, it is matched only by "*".
func globMatch(pattern, subject []rune, unknownIsAny bool) (ok, tooBig bool) {
	np, ns := len(pattern), len(subject)
	if (np+1)*(ns+1) > maxMatchCells {
		return false, true
	}
	// next[j] is whether pattern[i+1:] matches subject[j:]; cur for i.
	next := make([]bool, ns+1)
	cur := make([]bool, ns+1)
	// i == np: only the empty rest matches, or a rest of unknowns.
	next[ns] = true
	for j := ns - 1; j >= 0; j-- {
		next[j] = unknownIsAny && subject[j] == symUnknown && next[j+1]
	}
	for i := np - 1; i >= 0; i-- {
		p := pattern[i]
		cur[ns] = p == symWildcard && next[ns]
		for j := ns - 1; j >= 0; j-- {
			s := subject[j]
			switch {
			case p == symWildcard:
				cur[j] = next[j] || cur[j+1]
			case s == symUnknown:
				// The unknown text may be empty, or may produce p and go on.
				cur[j] = unknownIsAny && (cur[j+1] || next[j])
			default:
				cur[j] = p == s && next[j+1]
			}
		}
		next, cur = cur, next
	}
	return next[0], false
}

// matchRunes gives the three-valued outcome of pattern on subject.
func matchRunes(pattern, subject []rune) match {
	ok, tooBig := globMatch(pattern, subject, false)
	if tooBig {
		return maybeMatch
	}
	if ok {
		return fullMatch
	}
	if ok, _ := globMatch(pattern, subject, true); ok {
		return maybeMatch
	}
	return noMatch
}
