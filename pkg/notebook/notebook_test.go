package notebook_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/notebook"
)

// jupyter is a notebook as Jupyter writes it: keys sorted, one space of
// indentation, a final newline; nbformat 4.5, so cells have ids.
const jupyter = `{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {
    "tags": [
     "title"
    ]
   },
   "source": [
    "# Title\n",
    "Some <b>text</b> & more"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "calc",
   "metadata": {},
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "42\n"
     ]
    },
    {
     "data": {
      "image/png": "iVBORw0KGgo=\n",
      "text/plain": [
       "<Figure size 640x480>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "print(6 * 7)"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 4,
   "id": "boom",
   "metadata": {},
   "outputs": [
    {
     "ename": "ZeroDivisionError",
     "evalue": "division by zero",
     "output_type": "error",
     "traceback": [
      "Traceback (most recent call last)",
      "ZeroDivisionError: division by zero"
     ]
    }
   ],
   "source": [
    "1/0"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  },
  "language_info": {
   "name": "python",
   "version": "3.12.1"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
`

func parse(t *testing.T, s string) *notebook.Notebook {
	t.Helper()
	nb, err := notebook.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

func marshal(t *testing.T, nb *notebook.Notebook) string {
	t.Helper()
	b, err := nb.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not valid JSON: %v\n%s", err, b)
	}
	return string(b)
}

func TestRoundTripKeepsTheFileAsItWas(t *testing.T) {
	for name, src := range map[string]string{
		"jupyter": jupyter,
		// Another tool's layout: two spaces, keys unsorted, odd numbers
		// and escapes kept as written, no final newline.
		"other": "{\n  \"nbformat_minor\": 4,\n  \"nbformat\": 4,\n  \"metadata\": {\"z\": 1.50, \"a\": \"\\u00e9\\/\"},\n  \"cells\": []\n}",
	} {
		t.Run(name, func(t *testing.T) {
			got := marshal(t, parse(t, src))
			want := src
			if name == "other" {
				// Whitespace inside is normalised to the file's indentation;
				// everything else stays.
				want = "{\n  \"nbformat_minor\": 4,\n  \"nbformat\": 4,\n  \"metadata\": {\n    \"z\": 1.50,\n    \"a\": \"\\u00e9\\/\"\n  },\n  \"cells\": []\n}"
			}
			if got != want {
				t.Fatalf("round trip changed the file:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	nb := parse(t, jupyter)
	blocks := nb.Render("/w/n.ipynb", notebook.Limits{CellOutputChars: 10000, ImageBytes: 1 << 20})
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgo=")
	want := []notebook.Block{
		{Text: "<cell id=\"intro\"><cell_type>markdown</cell_type># Title\nSome <b>text</b> & more</cell id=\"intro\">\n" +
			"<cell id=\"calc\">print(6 * 7)</cell id=\"calc\">\n\n42\n\n\n<Figure size 640x480>"},
		{MediaType: "image/png", Data: png},
		{Text: "<cell id=\"boom\">1/0</cell id=\"boom\">\n\nZeroDivisionError: division by zero\nTraceback (most recent call last)\nZeroDivisionError: division by zero"},
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %d blocks: %+v", len(blocks), blocks)
	}
	for i := range want {
		if blocks[i].Text != want[i].Text || blocks[i].MediaType != want[i].MediaType || !bytes.Equal(blocks[i].Data, want[i].Data) {
			t.Errorf("block %d:\n got %+v\nwant %+v", i, blocks[i], want[i])
		}
	}

	t.Run("large outputs give a jq hint", func(t *testing.T) {
		blocks := nb.Render("/w/n.ipynb", notebook.Limits{CellOutputChars: 10, ImageBytes: 1 << 20})
		if len(blocks) != 1 || !strings.Contains(blocks[0].Text, "<cell id=\"calc\">print(6 * 7)</cell id=\"calc\">\n\nOutputs are too large to include. Use Bash with: cat \"/w/n.ipynb\" | jq '.cells[1].outputs'") {
			t.Fatalf("%+v", blocks)
		}
	})
	t.Run("large images are left out", func(t *testing.T) {
		blocks := nb.Render("/w/n.ipynb", notebook.Limits{CellOutputChars: 10000, ImageBytes: 4})
		if len(blocks) != 1 || !strings.Contains(blocks[0].Text, "[image/png output of 8 bytes not shown") {
			t.Fatalf("%+v", blocks)
		}
	})
	t.Run("cells without ids, another language", func(t *testing.T) {
		nb := parse(t, `{"cells":[{"cell_type":"code","source":"x <- 1","metadata":{},"outputs":[],"execution_count":null},{"cell_type":"raw","source":["a"],"metadata":{}}],"metadata":{"language_info":{"name":"R"}},"nbformat":4,"nbformat_minor":2}`)
		blocks := nb.Render("n.ipynb", notebook.Limits{CellOutputChars: 10000, ImageBytes: 1 << 20})
		want := "<cell id=\"cell-0\"><language>R</language>x <- 1</cell id=\"cell-0\">\n<cell id=\"cell-1\"><cell_type>raw</cell_type>a</cell id=\"cell-1\">"
		if len(blocks) != 1 || blocks[0].Text != want {
			t.Fatalf("%+v", blocks)
		}
	})
}

func TestFind(t *testing.T) {
	nb := parse(t, jupyter)
	for ref, want := range map[string]int{"intro": 0, "calc": 1, "boom": 2, "cell-1": 1} {
		if i, err := nb.Find(ref); err != nil || i != want {
			t.Errorf("Find(%q) = %d, %v; want %d", ref, i, err, want)
		}
	}
	for ref, msg := range map[string]string{
		"nope":    `Cell with ID "nope" not found in notebook.`,
		"cell-3":  "Cell with index 3 does not exist in notebook.",
		"cell-99": "Cell with index 99 does not exist in notebook.",
	} {
		_, err := nb.Find(ref)
		var nf *notebook.NotFoundError
		if !errors.As(err, &nf) || err.Error() != msg {
			t.Errorf("Find(%q) = %v, want %q", ref, err, msg)
		}
	}
}

func TestEdits(t *testing.T) {
	t.Run("replace code clears outputs", func(t *testing.T) {
		nb := parse(t, jupyter)
		nb.Replace(1, "print(1)\nprint(2)\n", "")
		got := marshal(t, nb)
		wantCell := "  {\n   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \"calc\",\n   \"metadata\": {},\n   \"outputs\": [],\n   \"source\": [\n    \"print(1)\\n\",\n    \"print(2)\\n\"\n   ]\n  },"
		if !strings.Contains(got, wantCell) {
			t.Fatalf("replaced cell not as expected:\n%s", got)
		}
		// Only that cell changed.
		if strings.Replace(got, wantCell, "", 1) != strings.Replace(jupyter, jupyterCalc, "", 1) {
			t.Fatalf("other parts changed:\n%s", got)
		}
	})
	t.Run("replace markdown keeps metadata, type change", func(t *testing.T) {
		nb := parse(t, jupyter)
		nb.Replace(0, "# New <title>", "")
		nb.Replace(2, "Now prose.", notebook.Markdown)
		got := marshal(t, nb)
		for _, want := range []string{
			"   \"id\": \"intro\",\n   \"metadata\": {\n    \"tags\": [\n     \"title\"\n    ]\n   },\n   \"source\": [\n    \"# New <title>\"\n   ]",
			"  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"boom\",\n   \"metadata\": {},\n   \"source\": [\n    \"Now prose.\"\n   ]\n  }",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("missing %q in\n%s", want, got)
			}
		}
	})
	t.Run("insert and delete", func(t *testing.T) {
		nb := parse(t, jupyter)
		id := nb.Insert(0, "import os", notebook.Code)
		if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(id) {
			t.Fatalf("new id %q", id)
		}
		id2 := nb.Insert(2, "", notebook.Markdown)
		nb.Delete(4) // boom, now at 4
		nb2 := parse(t, marshal(t, nb))
		var got []string
		for i := range nb2.Len() {
			got = append(got, nb2.CellID(i)+":"+nb2.CellType(i)+":"+nb2.Source(i))
		}
		want := []string{id + ":code:import os", "intro:markdown:# Title\nSome <b>text</b> & more", id2 + ":markdown:", "calc:code:print(6 * 7)"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("cells %q, want %q", got, want)
		}
		if !strings.Contains(marshal(t, nb), "   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \""+id+"\",\n   \"metadata\": {},\n   \"outputs\": [],\n   \"source\": [\n    \"import os\"\n   ]") {
			t.Errorf("inserted code cell not in nbformat's shape:\n%s", marshal(t, nb))
		}
	})
	t.Run("before 4.5 new cells have no id", func(t *testing.T) {
		nb := parse(t, `{"cells":[{"cell_type":"code","source":"a","metadata":{},"outputs":[],"execution_count":1}],"metadata":{},"nbformat":4,"nbformat_minor":4}`)
		if id := nb.Insert(1, "b", notebook.Code); id != "cell-1" {
			t.Fatalf("id %q", id)
		}
		if got := marshal(t, nb); strings.Contains(got, `"id"`) {
			t.Fatalf("an id in a 4.4 notebook:\n%s", got)
		}
	})
}

// jupyterCalc is the "calc" cell of jupyter as written there.
const jupyterCalc = "  {\n   \"cell_type\": \"code\",\n   \"execution_count\": 3,\n   \"id\": \"calc\",\n   \"metadata\": {},\n   \"outputs\": [\n    {\n     \"name\": \"stdout\",\n     \"output_type\": \"stream\",\n     \"text\": [\n      \"42\\n\"\n     ]\n    },\n    {\n     \"data\": {\n      \"image/png\": \"iVBORw0KGgo=\\n\",\n      \"text/plain\": [\n       \"<Figure size 640x480>\"\n      ]\n     },\n     \"metadata\": {},\n     \"output_type\": \"display_data\"\n    }\n   ],\n   \"source\": [\n    \"print(6 * 7)\"\n   ]\n  },"

func TestParseRefusesWhatIsNotANotebook(t *testing.T) {
	for _, src := range []string{
		`not json`,
		`[]`,
		`{"cells":[]}`,
		`{"nbformat":3,"worksheets":[]}`,
		`{"nbformat":4,"nbformat_minor":5}`,
		`{"nbformat":4,"cells":[1]}`,
		`{"nbformat":4,"cells":[null]}`,
	} {
		if _, err := notebook.Parse([]byte(src)); !errors.Is(err, notebook.ErrFormat) {
			t.Errorf("Parse(%s) = %v, want ErrFormat", src, err)
		}
	}
}

// FuzzEdit: whatever notebook parses, it writes back as valid JSON with the
// same cells, and stays so through edits.
func FuzzEdit(f *testing.F) {
	f.Add([]byte(jupyter), "x <y> & \"z\"\n", 1)
	f.Add([]byte(`{"cells":[{"cell_type":"raw","source":"a","metadata":{}}],"metadata":{},"nbformat":4,"nbformat_minor":2}`), "", 0)
	f.Add([]byte("{\"nbformat\":4,\"cells\":[],\"extra\":[1,2.50,{\"\\u00e9\":null}]}"), "\u2028", 3)
	f.Fuzz(func(t *testing.T, data []byte, src string, at int) {
		if len(data) > 64<<10 || len(src) > 4<<10 {
			return
		}
		nb, err := notebook.Parse(data)
		if err != nil || !utf8.ValidString(src) {
			// A source from the model is valid UTF-8: it came as JSON.
			return
		}
		check := func(nb *notebook.Notebook) *notebook.Notebook {
			out, err := nb.Marshal()
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON written:\n%s", out)
			}
			back, err := notebook.Parse(out)
			if err != nil {
				t.Fatalf("what was written does not parse: %v\n%s", err, out)
			}
			if back.Len() != nb.Len() {
				t.Fatalf("%d cells read back, want %d", back.Len(), nb.Len())
			}
			for i := range nb.Len() {
				if back.CellID(i) != nb.CellID(i) || back.Source(i) != nb.Source(i) || back.CellType(i) != nb.CellType(i) {
					t.Fatalf("cell %d changed: %q %q %q", i, back.CellID(i), back.CellType(i), back.Source(i))
				}
			}
			return back
		}
		nb = check(nb)
		i := 0
		if nb.Len() > 0 {
			i = (at%nb.Len() + nb.Len()) % nb.Len()
		}
		id := nb.Insert(i, src, notebook.Code)
		nb = check(nb)
		if j, err := nb.Find(id); err != nil || nb.Source(j) != src {
			t.Fatalf("inserted cell %q not found (%v) or changed", id, err)
		}
		nb.Replace(i, src+"!", notebook.Markdown)
		nb = check(nb)
		if nb.Source(i) != src+"!" || nb.CellType(i) != notebook.Markdown {
			t.Fatalf("replace did not hold: %q %q", nb.CellType(i), nb.Source(i))
		}
		nb.Delete(i)
		check(nb)
	})
}
