package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// maxCellRunes is the widest table cell a reader's screen takes.
const maxCellRunes = 200

// userDocs lists the documentation a user reads, relative to the root:
// README.md, the commands' READMEs and docs/ (notes included when
// withNotes).
func userDocs(t *testing.T, withNotes bool) []string {
	t.Helper()
	root := RepoRoot()
	files := []string{"README.md", "cmd/runtime/README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel == filepath.Join("docs", "notes") && !withNotes {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// line is one line of a markdown file outside its fenced code blocks.
type line struct {
	n    int
	text string
}

// prose returns a file's lines outside fenced code blocks.
func prose(t *testing.T, rel string) []line {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		trimmed := strings.TrimSpace(sc.Text())
		if fence == "" {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				continue
			}
			out = append(out, line{n, sc.Text()})
		} else if strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "" {
			fence = ""
		}
	}
	return out
}

// tableCells splits a markdown table row into its cells; a pipe escaped
// with a backslash stays in its cell.
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) {
		row = row[:len(row)-1]
	}
	var cells []string
	var b strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			b.WriteString(`\|`)
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

// wideTablesElsewhere lists files whose wide tables are being rewritten on
// another branch; each entry goes once that branch is merged (the test
// says so when the file passes).
var wideTablesElsewhere = map[string]bool{}

func TestTableCellsFitAScreen(t *testing.T) {
	for _, rel := range userDocs(t, false) {
		wide := 0
		defer func(rel string) {
			if wideTablesElsewhere[rel] && wide == 0 {
				t.Errorf("%s: its tables fit now: remove it from wideTablesElsewhere", rel)
			}
		}(rel)
		for _, l := range prose(t, rel) {
			if !strings.HasPrefix(strings.TrimSpace(l.text), "|") {
				continue
			}
			for i, cell := range tableCells(l.text) {
				if n := utf8.RuneCountInString(cell); n > maxCellRunes {
					wide++
					if wideTablesElsewhere[rel] {
						t.Logf("%s:%d: cell %d has %d characters (at most %d; allowed until the other branch merges)", rel, l.n, i+1, n, maxCellRunes)
						continue
					}
					t.Errorf("%s:%d: cell %d has %d characters (at most %d): %.60s…", rel, l.n, i+1, n, maxCellRunes, cell)
				}
			}
		}
	}
}

func TestTableCells(t *testing.T) {
	for _, tc := range []struct {
		row  string
		want []string
	}{
		{"| a | b |", []string{"a", "b"}},
		{"| `x\\|y` | z |", []string{"`x\\|y`", "z"}},
		{"a | b", []string{"a", "b"}},
	} {
		got := tableCells(tc.row)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("tableCells(%q) = %q, want %q", tc.row, got, tc.want)
		}
	}
}

var (
	issueRef = regexp.MustCompile(`(?i)\b(issues?|pull requests?|PRs?)\s*#?\d+|(^|[\s(\[,;])#\d+\b`)
	hexWord  = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
)

// trackerReferences returns the issue numbers and commit hashes in a line:
// a reader of the docs cannot resolve either.
func trackerReferences(s string) []string {
	var refs []string
	for _, m := range issueRef.FindAllString(s, -1) {
		refs = append(refs, strings.TrimSpace(m))
	}
	for _, m := range hexWord.FindAllString(s, -1) {
		if strings.IndexFunc(m, unicode.IsDigit) >= 0 && strings.IndexFunc(m, unicode.IsLetter) >= 0 {
			refs = append(refs, m)
		}
	}
	return refs
}

func TestTrackerReferences(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"see issue 19 and issues 5, 13", 2},
		{"fixed in #31.", 1},
		{"at commit 0ad4a86", 1},
		{"the [monitoring](docs/operator.md#monitoring) section", 0},
		{"1,000 idle connections, 2026-11-28, sha256 of deadbeef", 0},
		{"Qwen3-30B-A3B at 1024 tokens", 0},
	} {
		if got := trackerReferences(tc.text); len(got) != tc.want {
			t.Errorf("trackerReferences(%q) = %q, want %d", tc.text, got, tc.want)
		}
	}
}

func TestNoIssueNumbersOrCommitHashes(t *testing.T) {
	for _, rel := range userDocs(t, false) {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), rel))
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range strings.Split(string(data), "\n") {
			if refs := trackerReferences(text); len(refs) > 0 {
				t.Errorf("%s:%d: %q: issue numbers and commit hashes belong in docs/notes/, not in user docs", rel, i+1, refs)
			}
		}
	}
}

func TestReadmeShowsAPoolAndAPolicy(t *testing.T) {
	blocks, err := FencedBlocks(filepath.Join(RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"InferencePool", "SchedulerPolicy"} {
		found := false
		for _, b := range blocks {
			if b.Lang == "yaml" && regexp.MustCompile(`(?m)^kind: `+kind+`$`).MatchString(b.Text) {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md has no ```yaml block with kind: %s", kind)
		}
	}
}

func TestReadmeDoesNotDescribeTheDevelopmentMachines(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, phrase := range []string{"these machines", "development machine", "this oversubscribed", "2-core machine"} {
		if strings.Contains(strings.ToLower(string(data)), phrase) {
			t.Errorf("README.md mentions %q: the development machines belong in docs/development.md", phrase)
		}
	}
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// links returns the link targets of a file's prose, code spans excluded.
func links(t *testing.T, rel string) []line {
	var out []line
	for _, l := range prose(t, rel) {
		text := codeSpan.ReplaceAllString(l.text, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			out = append(out, line{l.n, m[1]})
		}
		if m := refLink.FindStringSubmatch(text); m != nil {
			out = append(out, line{l.n, m[1]})
		}
	}
	return out
}

func TestRelativeLinksResolve(t *testing.T) {
	root := RepoRoot()
	anchors := map[string]map[string]bool{}
	for _, rel := range userDocs(t, true) {
		for _, l := range links(t, rel) {
			target := l.text
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(filepath.Join(root, rel)), filepath.FromSlash(file))
			if file == "" {
				path = filepath.Join(root, rel)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", rel, l.n, target, file)
				continue
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = headingAnchors(t, path)
			}
			if !anchors[path][anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel, l.n, target, file, anchor)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives a file's headings:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func headingAnchors(t *testing.T, path string) map[string]bool {
	rel, _ := filepath.Rel(RepoRoot(), path)
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range prose(t, rel) {
		text := strings.TrimSpace(l.text)
		if !strings.HasPrefix(text, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(text, "#"))
		slug := slugify(title)
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	for in, want := range map[string]string{
		"Anthropic Messages API":                  "anthropic-messages-api",
		"Fetching a model (`runtime fetch`)":      "fetching-a-model-runtime-fetch",
		"What ran here: the image on a real node": "what-ran-here-the-image-on-a-real-node",
	} {
		if got := slugify(in); got != want {
			t.Errorf("slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPackageMap fails when a package map (README.md's, docs/development.md's)
// is not what hack/package-map.sh generates from the packages' comments
// today.
func TestPackageMap(t *testing.T) {
	root := RepoRoot()
	pkgs, err := ListPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range PackageMaps {
		table, err := PackageMap(pkgs, m.File, m.Groups)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, filepath.FromSlash(m.File))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		before, rest, ok1 := strings.Cut(string(data), PackageMapBegin)
		_, after, ok2 := strings.Cut(rest, PackageMapEnd)
		if !ok1 || !ok2 {
			t.Errorf("%s has no package map between %q and %q", m.File, PackageMapBegin, PackageMapEnd)
			continue
		}
		want := before + PackageMapBegin + "\n" + table + "\n" + PackageMapEnd + after
		if want == string(data) {
			continue
		}
		if os.Getenv("KVPILOT_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: package map rewritten", m.File)
			continue
		}
		t.Errorf("%s: the package map is stale: run hack/package-map.sh", m.File)
	}
}

func TestShortDoc(t *testing.T) {
	for in, want := range map[string]string{
		"Package clock is the time source of the schedulers.": "the time source of the schedulers",
		"Command manager is the kvpilot operator: it runs.":   "the kvpilot operator: it runs",
		"Package testing holds builders (in kueue's style).":  "holds builders (in kueue's style)",
		"": "(no package comment)",
	} {
		if got := ShortDoc(in); got != want {
			t.Errorf("ShortDoc(%q) = %q, want %q", in, got, want)
		}
	}
	long := "Package x is a thing (" + strings.Repeat("aside ", 20) + ") that does " + strings.Repeat("work, ", 40) + "well."
	if got := ShortDoc(long); utf8.RuneCountInString(got) > maxDocRunes+2 || strings.Contains(got, "aside") {
		t.Errorf("ShortDoc(long) = %q: over %d characters or kept its aside", got, maxDocRunes)
	}
}
