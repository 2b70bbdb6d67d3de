package readpast_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// The documentation describes the product: what it does, what it
// promises, how it is measured. These tests keep it so, and keep its
// relative links working. They read README.md, CHANGELOG.md and every
// Markdown file under docs/.

// docFiles lists the Markdown files the documentation tests read, as
// slash-separated paths relative to the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files[2:])
	return files
}

// markdown is one documentation file, its fenced code blocks blanked out.
type markdown struct {
	name string
	raw  string // the file as read
	// prose is raw with the contents of fenced code blocks replaced by
	// spaces (newlines kept), so offsets and line numbers still match.
	prose string
}

var fenceRE = regexp.MustCompile("^ {0,3}(```+|~~~+)")

func readMarkdown(t *testing.T, name string) markdown {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		t.Fatal(err)
	}
	return parseMarkdown(name, string(b))
}

// parseMarkdown blanks out the fenced code blocks of raw, fences included.
func parseMarkdown(name, raw string) markdown {
	prose := []byte(raw)
	fence := ""
	off := 0
	for _, line := range strings.SplitAfter(raw, "\n") {
		m := fenceRE.FindStringSubmatch(line)
		inside := fence != ""
		switch {
		case fence == "" && m != nil:
			fence = m[1][:3]
			inside = true
		case fence != "" && m != nil && strings.HasPrefix(m[1], fence):
			fence = ""
		}
		if inside {
			for i := off; i < off+len(line); i++ {
				if prose[i] != '\n' {
					prose[i] = ' '
				}
			}
		}
		off += len(line)
	}
	return markdown{name: name, raw: raw, prose: string(prose)}
}

// lineOf is the 1-based line of byte offset off.
func (m markdown) lineOf(off int) int { return strings.Count(m.raw[:off], "\n") + 1 }

// flat is the prose as one line: newlines, backquotes and asterisks turned
// into spaces, so a phrase broken over lines or marked up still matches,
// at the same offsets.
func (m markdown) flat() string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '`', '*':
			return ' '
		}
		return r
	}, m.prose)
}

// sentenceAround returns the sentence of s (flattened prose) around
// offset i: bounded by a full stop, question or exclamation mark followed
// by a space, a table cell's bar, or a blank line of the original.
func (m markdown) sentenceAround(s string, i int) string {
	isEnd := func(j int) bool {
		switch {
		case s[j] == '|':
			return true
		case (s[j] == '.' || s[j] == '?' || s[j] == '!') && j+1 < len(s) && s[j+1] == ' ':
			return true
		case m.raw[j] == '\n' && j+1 < len(m.raw) && strings.TrimSpace(m.raw[j+1:j+1+strings.IndexByte(m.raw[j+1:]+"\n", '\n')]) == "":
			return true
		}
		return false
	}
	from := i
	for from > 0 && !isEnd(from-1) {
		from--
	}
	to := i
	for to < len(s) && !isEnd(to) {
		to++
	}
	return s[from:to]
}

const ordinals = `first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(?:st|nd|rd|th)`

var (
	sessionRE = regexp.MustCompile(`(?i)\bsessions?\b`)
	// The phrases the documentation uses for a session of the database, a
	// pooler or a login. sessionAllowedBefore is matched against the text
	// up to and with the word, sessionAllowedAfter against the text from it.
	sessionAllowedBefore = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(server|database|postgres|postgresql|pooler|pooler's|pgbouncer|listen|login|dashboard|read-only|browser|backend|client|psql|warm|cold|new|idle|its own)[ -]+sessions?$`),
		regexp.MustCompile(`(?i)\b(end|ends|ended|ending|terminate|terminates|terminated|terminating) the( server)? sessions?$`),
		regexp.MustCompile(`(?i)\b(once per|per|the life of a|in a) sessions?$`),
	}
	sessionAllowedAfter = []*regexp.Regexp{
		regexp.MustCompile(`(?i)^sessions?[ -]+(mode|pooling|cookies?|state|variables?|settings?|defaults?|advisory|idle in|level|parameters?|timeouts?|whose default|cannot be ended|can be ended|ended|is still there|first claims)\b`),
		regexp.MustCompile(`(?i)^sessions?'s\s+(default|prepared|plans?|own|search_path|settings?)\b`),
	}
	// Words that make "session" a round of work: "this session", "the
	// session before", "a seventh session".
	sessionWorkBefore = regexp.MustCompile(`(?i)\b(this|these|that|those|last|earlier|later|next|previous|prior|following|` + ordinals + `)[ -]+$`)
	sessionWorkAfter  = regexp.MustCompile(`(?i)^sessions?('s)?\s+(before|after|of \d{4}|found|landed|changed|did|work|runs?|figures|builds?|machine)\b`)
	// Words that say a sentence speaks of a database's sessions.
	sessionDatabase = regexp.MustCompile(`(?i)\b(jit_above_cost|search_path|pg_[a-z_]+|advisory|isolation|listen|notify|prepared|pid|pgbouncer|pooler|backend|connections?|transactions?|auto_explain|routines?|plans?|planned|tables?|index|indexes|statements?|queries|query)\b`)

	// Other wording that tells how or when the work was done.
	workRules = []struct {
		re      *regexp.Regexp
		why     string
		history bool // allowed in CHANGELOG.md, whose subject is history
		hex     bool // group 1 is a commit's hex name, unless a number or part of a name
	}{
		{regexp.MustCompile(`(?i)\b(this|that)\s+turn\b`), "a turn of the work", false, false},
		{regexp.MustCompile(`(?i)\b(last|previous|earlier|later|` + ordinals + `)\s+turns?\b`), "a turn of the work", false, false},
		{regexp.MustCompile(`(?i)\bturns?\s+\d+\b`), "a turn of the work", false, false},
		{regexp.MustCompile(`(?i)\b(` + ordinals + `|\d+)\s+rounds?\s+of\s+(the\s+)?(work|review|changes|fixes)\b`), "a round of the work", false, false},
		{regexp.MustCompile(`(?i)\bround\s+\d+\s+of\s+(the\s+)?(work|review|changes|fixes)\b`), "a round of the work", false, false},
		{regexp.MustCompile(`(?i)\bthe\s+(fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)\s*([,.;:)]|$)`), "an ordinal round of the work", false, false},
		{regexp.MustCompile(`(?:^|[^\w./-])([0-9a-f]{7,40})\b`), "a commit", false, true},
		{regexp.MustCompile(`(?i)\bwe\s+(found|fixed|saw|changed|measured|tried|added|removed|broke)\b`), "what was done", true, false},
		{regexp.MustCompile(`(?i)\b(was|were|got)\s+(fixed|found)\b`), "what was done", true, false},
		{regexp.MustCompile(`(?i)\b(before|after|until)\s+(the|this|that|its)\s+(fix|mend)\b`), "a fix", true, false},
		{regexp.MustCompile(`(?i)\(before:`), "what the product did before", true, false},
		{regexp.MustCompile(`(?i)\b(earlier|previous|older)\s+builds?\b`), "an earlier build", true, false},
		{regexp.MustCompile(`(?i)\breview('s)?\s+(mends?|broke)\b`), "a review of the work", true, false},
		{regexp.MustCompile(`(?i)\bpreviously\b`), "what the product did before", true, false},
		{regexp.MustCompile(`(?i)\b(issue\s+\d+|closing note)\b`), "an issue of the work", true, false},
	}
	hexRE = regexp.MustCompile(`^[0-9a-f]*[0-9][0-9a-f]*$`)
)

// workWording returns file:line: problem for each place in m that tells
// how or when the work was done instead of describing the product.
func workWording(m markdown) []string {
	s := m.flat()
	var out []string
	report := func(off int, why, what string) {
		out = append(out, fmt.Sprintf("%s:%d: %s (%q)", m.name, m.lineOf(off), why, strings.TrimSpace(what)))
	}
	for _, loc := range sessionRE.FindAllStringIndex(s, -1) {
		before := s[max(0, loc[0]-40):loc[1]]
		after := s[loc[0]:min(len(s), loc[0]+40)]
		allowed := false
		for _, re := range sessionAllowedBefore {
			allowed = allowed || re.MatchString(before)
		}
		for _, re := range sessionAllowedAfter {
			allowed = allowed || re.MatchString(after)
		}
		if allowed {
			continue
		}
		if sessionWorkBefore.MatchString(s[max(0, loc[0]-40):loc[0]]) || sessionWorkAfter.MatchString(after) ||
			!sessionDatabase.MatchString(m.sentenceAround(s, loc[0])) {
			report(loc[0], `"session" as a round of work (only a database, pooler or login session belongs here)`,
				s[max(0, loc[0]-30):min(len(s), loc[1]+30)])
		}
	}
	history := m.name == "CHANGELOG.md"
	for _, r := range workRules {
		if r.history && history {
			continue
		}
		for _, loc := range r.re.FindAllStringSubmatchIndex(s, -1) {
			off, what := loc[0], s[loc[0]:loc[1]]
			if r.hex {
				off, what = loc[2], s[loc[2]:loc[3]]
				if !hexRE.MatchString(what) || strings.IndexFunc(what, unicode.IsLetter) < 0 || partOfName(s, loc[3]) {
					continue // a number, or part of a name or an id
				}
			}
			report(off, "speaks of "+r.why, what)
		}
	}
	return out
}

// partOfName reports whether the text at s[i:] goes on with a name: a
// '-', '_' or '/', or a '.' followed by a letter or digit (a file name).
func partOfName(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	switch s[i] {
	case '-', '_', '/':
		return true
	case '.':
		return i+1 < len(s) && (unicode.IsLetter(rune(s[i+1])) || unicode.IsDigit(rune(s[i+1])))
	}
	return false
}

// TestDocsSpeakOfTheProduct fails on wording in the documentation that
// tells how or when the work was done (sessions and turns of work, rounds
// numbered by ordinals, commits, fixes) instead of what the product does.
// Database, pooler and login sessions are the product's and pass.
func TestDocsSpeakOfTheProduct(t *testing.T) {
	for _, name := range docFiles(t) {
		for _, p := range workWording(readMarkdown(t, name)) {
			t.Error(p)
		}
	}
}

// TestDocsWorkWordingRules pins the rules of TestDocsSpeakOfTheProduct on
// phrases the documentation uses or must not use.
func TestDocsWorkWordingRules(t *testing.T) {
	pass := []string{
		"Behind a pooler, transactions may reach different server sessions.",
		"Add `readpast_listen=off`: no LISTEN\nsession.",
		"Nothing else depends on session state, and the store sets no session variable.",
		"The store waits when `place` equals the session setting `readpast.stall`.",
		"A cancel does not end the wait; ending the session does.",
		"In a session whose default isolation is REPEATABLE READ the claim fails.",
		"A plan kept for the life of a session must be right at any table size.",
		"The routines are planned once per session.",
		"The test sets `jit_above_cost` to 0 in a session.",
		"PgBouncer in session mode keeps LISTEN working; a login session lasts 12 hours.",
		"The session cookie is `__Host-readpast`.",
		"Claims waiting for the same queues take turns; a writer waits its turn; the dashboard turns it off.",
		"The second round trip binds the statement; the first round of retries is short; the first round 69%.",
		"It grows the tables and checks on the same session that a claim reads no table sequentially.",
		"The session ended, then the token's jobs released.",
		"A flag that turns it off; this turns the poll off.",
		"Group rows, then key rows, in turn.",
		"`target_session_attrs=read-write` and `end_claim_session.sql`.",
		"A token such as 6f1c2b9e-4d3a-4b8e-9a57-0c2d8e4f7a13 is a claim's.",
		"It runs at 1000000 jobs and 2,000 rows before 1234567; see docs/bench/abc1234f/results.json and run-1a2b3c4d.txt.",
		"```\nthis session was fixed before abc1234\n```\n",
		"The fourth claim takes nothing.",
	}
	fail := []string{
		"The figures of this session are below.",
		"In the seventh session the claim got faster.",
		"an eighth session: every target met",
		"The session before this one measured 1.2x.",
		"Measured in a later session.",
		"landed in the seventh, as planned.",
		"This turn adds the dashboard.",
		"The second round of the work made it faster.",
		"The claim is faster than before abc1234.",
		"3.1 µs a job on 19037f8.",
		"See commit 9f8e7d6c.",
		"The last build (27f7a34: tokens) is faster.",
		"The race was fixed by locking.",
		"We found that the claim waited.",
		"(before: the claim waited)",
		"Before the fix the claim waited.",
		"An earlier build took 2 s.",
		"See the closing note of issue 12.",
	}
	check := func(text string) []string { return workWording(parseMarkdown("x.md", text)) }
	for _, text := range pass {
		if got := check(text); len(got) > 0 {
			t.Errorf("%q flagged: %v", text, got)
		}
	}
	for _, text := range fail {
		if got := check(text); len(got) == 0 {
			t.Errorf("%q not flagged", text)
		}
	}
}

var (
	inlineLinkRE = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+("[^"]*"|'[^']*'))?\s*\)`)
	refLinkRE    = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	codeSpanRE   = regexp.MustCompile("`+[^`]*`+")
	schemeRE     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	atxRE        = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE     = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	mdLinkRE     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE    = regexp.MustCompile(`<[^>]+>`)
	htmlAnchorRE = regexp.MustCompile(`(?i)<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']`)
)

// anchors returns the GitHub anchors of m's headings: the heading's text
// as rendered, lower-cased, with every character but letters, digits,
// spaces, '-' and '_' dropped and each space made a '-'; a repeated anchor
// gets -1, -2, ... in order.
func anchors(m markdown) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := strings.Split(m.prose, "\n")
	rawLines := strings.Split(m.raw, "\n")
	add := func(text string) {
		text = mdLinkRE.ReplaceAllString(text, "$1")
		text = htmlTagRE.ReplaceAllString(text, "")
		text = strings.NewReplacer("`", "", "*", "").Replace(strings.TrimSpace(text))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n, ok := seen[slug]; ok {
			seen[slug] = n + 1
			out[fmt.Sprintf("%s-%d", slug, n+1)] = true
			return
		}
		seen[slug] = 0
		out[slug] = true
	}
	for _, g := range htmlAnchorRE.FindAllStringSubmatch(m.prose, -1) {
		out[g[1]] = true
	}
	for i, line := range lines {
		if strings.TrimSpace(line) == "" && strings.TrimSpace(rawLines[i]) != "" {
			continue // inside a code block
		}
		if g := atxRE.FindStringSubmatch(line); g != nil {
			add(g[2])
			continue
		}
		if i > 0 && setextRE.MatchString(line) {
			prev := strings.TrimSpace(lines[i-1])
			if prev != "" && !strings.HasPrefix(prev, "|") && !strings.HasPrefix(prev, "#") &&
				!strings.HasPrefix(prev, "-") && !strings.HasPrefix(prev, "*") && !strings.HasPrefix(prev, ">") {
				add(prev)
			}
		}
	}
	return out
}

// brokenLinks returns file:line: problem for each relative link of m
// that names no existing file, or an anchor its Markdown target lacks.
func brokenLinks(m markdown, anchorsOf func(name string) (map[string]bool, error)) []string {
	text := codeSpanRE.ReplaceAllStringFunc(m.prose, func(s string) string {
		return strings.Repeat(" ", len(s))
	})
	type link struct {
		off    int
		target string
	}
	var links []link
	for _, g := range inlineLinkRE.FindAllStringSubmatchIndex(text, -1) {
		links = append(links, link{g[0], text[g[2]:g[3]]})
	}
	for _, g := range refLinkRE.FindAllStringSubmatchIndex(text, -1) {
		if !strings.HasPrefix(strings.TrimSpace(text[g[0]:]), "[^") { // not a footnote
			links = append(links, link{g[0], text[g[2]:g[3]]})
		}
	}
	sort.Slice(links, func(i, j int) bool { return links[i].off < links[j].off })
	var out []string
	for _, l := range links {
		target := strings.TrimSuffix(strings.TrimPrefix(l.target, "<"), ">")
		if target == "" || schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
			continue
		}
		where := fmt.Sprintf("%s:%d: link %s", m.name, m.lineOf(l.off), target)
		path, frag, _ := strings.Cut(target, "#")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
		dest := m.name
		if path != "" {
			if strings.HasPrefix(path, "/") {
				dest = strings.TrimPrefix(path, "/")
			} else {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(m.name), path))
			}
			if _, err := os.Stat(filepath.FromSlash(dest)); err != nil {
				out = append(out, where+": no such file "+dest)
				continue
			}
		}
		if frag == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		if f, err := url.PathUnescape(frag); err == nil {
			frag = f
		}
		as, err := anchorsOf(dest)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		if !as[frag] {
			out = append(out, fmt.Sprintf("%s: %s has no heading with anchor #%s", where, dest, frag))
		}
	}
	return out
}

// TestDocsLinksResolve fails on a relative link in the documentation
// that names no existing file, or an anchor that is no heading of its
// Markdown target (GitHub's anchors).
func TestDocsLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(name string) (map[string]bool, error) {
		if as, ok := cache[name]; ok {
			return as, nil
		}
		b, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			return nil, err
		}
		as := anchors(parseMarkdown(name, string(b)))
		cache[name] = as
		return as, nil
	}
	for _, name := range docFiles(t) {
		for _, p := range brokenLinks(readMarkdown(t, name), anchorsOf) {
			t.Error(p)
		}
	}
}

// TestDocsAnchorRules pins the anchor rules on headings of the kinds the
// documentation uses.
func TestDocsAnchorRules(t *testing.T) {
	text := "# Testing\n\n## The fault suite's checker (`internal/history`)\n\n### Claims exactly once (`storetest`, `checkHistory`)\n\n" +
		"## Notes\n\n## Notes\n\nA heading\n---------\n\n```\n# not a heading\n```\n\n## Faults: what breaks — and why?\n" +
		"\n<a name=\"counting-in-the-statements\"></a>\n"
	got := anchors(parseMarkdown("x.md", text))
	for _, want := range []string{"testing", "the-fault-suites-checker-internalhistory",
		"claims-exactly-once-storetest-checkhistory", "notes", "notes-1", "a-heading", "faults-what-breaks--and-why",
		"counting-in-the-statements"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block made an anchor")
	}
}
