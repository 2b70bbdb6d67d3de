package storekit

import (
	"strings"

	"github.com/google/uuid"
)

// CanonToken returns a claim token in the form claims hand tokens out, a
// UUID's lower-case hyphenated form, when it reads as a UUID in any
// spelling uuid.Parse takes (upper case, braces, a urn:uuid: prefix, no
// hyphens), so every store takes the same spellings of a token. Anything
// else comes back unchanged, and matches no claim.
func CanonToken(token string) string {
	if len(token) == 36 && !strings.ContainsAny(token, "ABCDEF") {
		return token // canonical, or malformed: either way as it is
	}
	u, err := uuid.Parse(token)
	if err != nil {
		return token
	}
	return u.String()
}
