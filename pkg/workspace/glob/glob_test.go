package glob

import (
	"slices"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern string
		dot     bool
		name    string
		want    bool
	}{
		{"*.go", false, "main.go", true},
		{"*.go", false, "cmd/main.go", false},
		{"**/*.go", false, "main.go", true},
		{"**/*.go", false, "a/b/c/main.go", true},
		{"**/*.go", false, "a/.hidden/main.go", false},
		{"**/*.go", true, "a/.hidden/main.go", true},
		{"*", false, ".env", false},
		{".*", false, ".env", true},
		{"src/**", false, "src/a/b", true},
		{"src/**", false, "src", true},
		{"src/**", false, "lib/a", false},
		{"**/*.{ts,tsx}", false, "web/app.tsx", true},
		{"**/*.{ts,tsx}", false, "web/app.js", false},
		{"{a,b/{c,d}}/x", false, "b/d/x", true},
		{"{a,b/{c,d}}/x", false, "b/e/x", false},
		{"file?.txt", false, "file1.txt", true},
		{"[ab].txt", false, "c.txt", false},
		{"[!ab].txt", false, "c.txt", true},
		{"[!ab].txt", false, "a.txt", false},
		{"[^ab].txt", false, "c.txt", true},
		{"[a!].txt", false, "!.txt", true},
		{`\[!a].txt`, false, "[!a].txt", true},
		{`\[!a].txt`, false, "b.txt", false},
		{"[!x]", true, "/", false},
		{"a[!x]b", true, "a/b", false},
		{`\*.txt`, false, "*.txt", true},
		{`\*.txt`, false, "a.txt", false},
		{"**/.ssh/**", true, "/home/u/.ssh/id_rsa", true},
		{"**/.ssh/**", true, "/home/u/.ssh", true},
		{"**/.ssh/**", true, "/home/u/ssh/x", false},
		{"**/id_rsa*", true, "/home/u/.ssh/id_rsa.pub", true},
		{"**/.env", true, "/srv/app/.env", true},
		{"**/.env", true, "/srv/app/.env.example", false},
		{"/etc/**", true, "/etc/passwd", true},
		{"/etc/**", true, "etc/passwd", false},
	}
	for _, tt := range tests {
		var opts []Option
		if tt.dot {
			opts = append(opts, MatchDot())
		}
		p, err := Compile(tt.pattern, opts...)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.pattern, err)
		}
		if got := p.Match(tt.name); got != tt.want {
			t.Errorf("Compile(%q, dot=%v).Match(%q) = %v, want %v", tt.pattern, tt.dot, tt.name, got, tt.want)
		}
	}
}

func TestMatchPrefix(t *testing.T) {
	tests := []struct {
		pattern, dir string
		want         bool
	}{
		{"src/**/*.go", "src", true},
		{"src/**/*.go", "src/a/b", true},
		{"src/**/*.go", "lib", false},
		{"*.go", "sub", false},
		{"a/b/*.go", "a", true},
		{"a/b/*.go", "a/c", false},
		{"**/*.go", ".git", false},
	}
	for _, tt := range tests {
		p := MustCompile(tt.pattern)
		if got := p.MatchPrefix(tt.dir); got != tt.want {
			t.Errorf("%q.MatchPrefix(%q) = %v, want %v", tt.pattern, tt.dir, got, tt.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, bad := range []string{"a{b", "a}b", "[", "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"} {
		if _, err := Compile(bad); err == nil {
			t.Errorf("Compile(%q) succeeded, want error", bad)
		}
	}
}

func TestStaticPrefix(t *testing.T) {
	tests := []struct{ in, prefix, rest string }{
		{"src/**/*.go", "src", "**/*.go"},
		{"*.go", "", "*.go"},
		{"a/b.txt", "a", "b.txt"},
		{"/abs/dir/**/*.go", "/abs/dir", "**/*.go"},
		{"/*.go", "/", "*.go"},
	}
	for _, tt := range tests {
		p, r := StaticPrefix(tt.in)
		if p != tt.prefix || r != tt.rest {
			t.Errorf("StaticPrefix(%q) = %q, %q; want %q, %q", tt.in, p, r, tt.prefix, tt.rest)
		}
	}
}

func TestExpandBraces(t *testing.T) {
	got, err := expandBraces("x{a,b{c,d}}y")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"xay", "xbcy", "xbdy"}
	if !slices.Equal(got, want) {
		t.Errorf("expandBraces = %q, want %q", got, want)
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("**/*.{go,md}", "a/b/c.go")
	f.Add("[a-", "x")
	f.Add(`[\]0]`, "0")      // an escaped ] inside a class is not its end
	f.Add("[]a]x*y", "ax-y") // nor is a ] first in the class
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := Compile(pattern, MatchDot())
		if err != nil {
			return
		}
		if p.Match(name) && !p.MatchPrefix(name) {
			t.Errorf("%q matches %q but not as a prefix", pattern, name)
		}
		if got, want := p.Match(name), matchWithoutLiterals(p, name); got != want {
			t.Errorf("%q against %q: Match %v, the segments alone %v", pattern, name, got, want)
		}
	})
}

// matchWithoutLiterals is Match without the literal pre-check.
func matchWithoutLiterals(p *Pattern, name string) bool {
	for _, a := range p.alts {
		if p.run(a, splitSegments(name), false) {
			return true
		}
	}
	return false
}

// The literal pre-check never rules out a path the segments would match.
func TestRequiredLiteral(t *testing.T) {
	patterns := []string{"**/.ssh/**", "**/*.pem", "**/id_rsa*", "**/.env", "/etc/**", "a[bc]d/*x?y",
		`**/\*.go`, "**/{secret,token}s.txt", "**/[.]env", "*", "**"}
	names := []string{"/home/u/.ssh/id", "/p/key.pem", "/p/id_rsa.pub", "/p/.env", "/p/.envrc", "/etc/passwd",
		"abd/zxqy", "acd/xay", "/src/*.go", "/a/secrets.txt", "/a/tokens.txt", "/a/.env", "x", "/"}
	for _, pat := range patterns {
		p := MustCompile(pat, MatchDot())
		for _, name := range names {
			if got, want := p.Match(name), matchWithoutLiterals(p, name); got != want {
				t.Errorf("%q against %q: Match %v, the segments alone %v", pat, name, got, want)
			}
		}
	}
	// Only the text before a segment's first class or escape counts.
	for pat, want := range map[string]string{"**/a[bc]defg/x*yz": "yz", `[\]0]`: "", "ab[]c]": "ab", `x\*yz`: "x"} {
		if got := requiredLiteral(splitSegments(pat)); got != want {
			t.Errorf("requiredLiteral(%q) = %q, want %q", pat, got, want)
		}
	}
}

func TestSet(t *testing.T) {
	s := Set{MustCompile("**/*.pem", MatchDot()), MustCompile("**/.env", MatchDot())}
	if p, ok := s.Match("/a/.env"); !ok || p.String() != "**/.env" {
		t.Errorf("Set.Match(/a/.env) = %v, %v", p, ok)
	}
	if _, ok := s.Match("/a/env"); ok {
		t.Error("Set.Match(/a/env) matched")
	}
	if _, ok := Set(nil).Match("/a"); ok {
		t.Error("empty Set matched")
	}
}
