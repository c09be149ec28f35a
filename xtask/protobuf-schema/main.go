// Command protobuf-schema writes crates/protobuf/src/generated.rs: the table kcache-protobuf
// decodes Kubernetes' protobuf encoding of built-in types with (issue 38).
//
// Usage (`cargo xtask protobuf-schema` runs exactly this):
//
//	cd xtask/protobuf-schema && go run . > ../../crates/protobuf/src/generated.rs
//
// The table comes from the Go types themselves, by reflection over every type client-go's
// scheme registers (k8s.io/client-go/kubernetes/scheme), because the .proto files do not say
// what the decoder must know to give k8s-openapi the object the JSON encoding would have given:
// the JSON name of each protobuf field, whether the field is inlined into its parent in JSON
// (`json:",inline"` with a protobuf tag: PersistentVolumeSource in PersistentVolumeSpec, say),
// whether JSON omits it when empty (`omitempty`: the protobuf encoding writes every non-pointer
// field, empty strings and zeros included), whether it is a pointer (the encoder writes a
// non-pointer field even when JSON has none), and which fields are the types whose protobuf
// form differs from their JSON form (Time, MicroTime, Duration, IntOrString, Quantity,
// RawExtension, FieldsV1).
//
// A kind whose types reach anything the table cannot describe is left out: kcache then decodes
// it from JSON, as it does custom resources.
package main

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/client-go/kubernetes/scheme"
)

type field struct {
	number  int
	json    string
	kind    string // Rust Kind expression
	flags   []string
	problem string
}

type message struct {
	name        string
	fields      []field
	unsupported string // why, if the message or a message it reaches cannot be described
	reaches     []reflect.Type
}

var (
	messages = map[reflect.Type]*message{}
	order    []reflect.Type
)

var special = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":       "Kind::Time",
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":  "Kind::MicroTime",
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":   "Kind::Duration",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": "Kind::IntOrString",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   "Kind::Quantity",
	"k8s.io/apimachinery/pkg/runtime.RawExtension":    "Kind::RawExtension",
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":   "Kind::FieldsV1",
}

func fullName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// hasMarshal tells whether a named non-struct type has its own protobuf message (a named slice
// such as authentication/v1.ExtraValue is `message ExtraValue { repeated string items = 1; }`).
func hasMarshal(t reflect.Type) bool {
	_, ok := reflect.PointerTo(t).MethodByName("Marshal")
	return ok && t.Name() != ""
}

func scalar(t reflect.Type) (string, bool) {
	switch t.Kind() {
	case reflect.String:
		return "Kind::String", true
	case reflect.Bool:
		return "Kind::Bool", true
	case reflect.Int32:
		return "Kind::Int32", true
	case reflect.Int64, reflect.Int:
		return "Kind::Int64", true
	case reflect.Uint32:
		return "Kind::Uint32", true
	case reflect.Uint64:
		return "Kind::Uint64", true
	case reflect.Float64:
		return "Kind::Double", true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "Kind::Bytes", true
		}
	}
	return "", false
}

// valueKind is the Kind of a single value of type t (a field's, a repeated field's element or a
// map's value).
func valueKind(t reflect.Type, m *message) (string, string) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		if k, ok := special[fullName(t)]; ok {
			return k, ""
		}
		m.reaches = append(m.reaches, t)
		return fmt.Sprintf("Kind::Message(%d)", index(t)), ""
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String && hasMarshal(t) {
		return "Kind::StringList", ""
	}
	if k, ok := scalar(t); ok {
		return k, ""
	}
	return "", "unsupported Go type " + t.String()
}

func index(t reflect.Type) int {
	for i, o := range order {
		if o == t {
			return i
		}
	}
	order = append(order, t)
	messages[t] = nil
	return len(order) - 1
}

func describe(t reflect.Type) *message {
	m := &message{name: fullName(t)}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		ptag := sf.Tag.Get("protobuf")
		jtag := sf.Tag.Get("json")
		jname, jopts, _ := strings.Cut(jtag, ",")
		if ptag == "" || ptag == "-" {
			if jname != "-" && !(sf.Anonymous && sf.Type.Name() == "TypeMeta") && sf.IsExported() {
				// In JSON but not in protobuf: say so, the kind still decodes (the field is
				// absent, as from a server that does not write it).
				fmt.Fprintf(os.Stderr, "note: %s.%s has no protobuf tag\n", m.name, sf.Name)
			}
			continue
		}
		parts := strings.Split(ptag, ",")
		num, err := strconv.Atoi(parts[1])
		if err != nil {
			panic(ptag)
		}
		f := field{number: num, json: jname}
		// encoding/json promotes the fields of an anonymous struct field without a JSON name
		// (`json:""` or `json:",inline"`) into the parent object.
		inline := sf.Anonymous && jname == ""
		if strings.Contains(","+jopts+",", ",omitempty,") {
			f.flags = append(f.flags, "OMIT_EMPTY")
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.flags = append(f.flags, "NULLABLE")
			ft = ft.Elem()
		}
		switch {
		case inline:
			if ft.Kind() != reflect.Struct {
				f.problem = "inline non-struct"
				break
			}
			m.reaches = append(m.reaches, ft)
			f.kind = fmt.Sprintf("Kind::Inline(%d)", index(ft))
		case ft.Kind() == reflect.Map:
			if ft.Key().Kind() != reflect.String {
				f.problem = "map key " + ft.Key().String()
				break
			}
			f.flags = append(f.flags, "MAP")
			f.kind, f.problem = valueKind(ft.Elem(), m)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && !hasMarshal(ft):
			f.flags = append(f.flags, "REPEATED")
			et := ft.Elem()
			if et.Kind() == reflect.Slice && et.Elem().Kind() != reflect.Uint8 && !hasMarshal(et) {
				f.problem = "slice of slices " + ft.String()
				break
			}
			f.kind, f.problem = valueKind(et, m)
		default:
			f.kind, f.problem = valueKind(ft, m)
		}
		if f.problem != "" && m.unsupported == "" {
			m.unsupported = fmt.Sprintf("%s.%s: %s", m.name, sf.Name, f.problem)
		}
		m.fields = append(m.fields, f)
	}
	sort.Slice(m.fields, func(a, b int) bool { return m.fields[a].number < m.fields[b].number })
	for i := 1; i < len(m.fields); i++ {
		if m.fields[i].number == m.fields[i-1].number {
			panic(fmt.Sprintf("%s: field number %d twice", m.name, m.fields[i].number))
		}
	}
	return m
}

func main() {
	type gvk struct{ apiVersion, kind string }
	var kinds []gvk
	kindType := map[gvk]reflect.Type{}
	for k, t := range scheme.Scheme.AllKnownTypes() {
		if k.Version == "__internal" || t.Kind() != reflect.Struct {
			continue
		}
		if _, ok := reflect.PointerTo(t).MethodByName("Marshal"); !ok {
			continue // no protobuf form (some options types)
		}
		av := k.Version
		if k.Group != "" {
			av = k.Group + "/" + k.Version
		}
		g := gvk{av, k.Kind}
		kinds = append(kinds, g)
		kindType[g] = t
	}
	sort.Slice(kinds, func(a, b int) bool {
		if kinds[a].apiVersion != kinds[b].apiVersion {
			return kinds[a].apiVersion < kinds[b].apiVersion
		}
		return kinds[a].kind < kinds[b].kind
	})
	// Messages in a deterministic order: the kinds' types in kind order, then what they reach,
	// breadth first.
	for _, k := range kinds {
		index(kindType[k])
	}
	describeAll := func() {
		for i := 0; i < len(order); i++ {
			t := order[i]
			if messages[t] == nil {
				messages[t] = describe(t)
			}
		}
	}
	describeAll()
	// The metadata-only kinds kube-apiserver converts any object to when `Accept` asks
	// (`as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1|v1beta1`, client-go's metadata
	// client). client-go's scheme does not register them; they come last so that adding them
	// left every other message's index as it was. v1beta1's PartialObjectMetadata is v1's type;
	// its list is a type of its own, with other field numbers (items 1, metadata 2).
	metaKinds := []gvk{
		{"meta.k8s.io/v1", "PartialObjectMetadata"},
		{"meta.k8s.io/v1", "PartialObjectMetadataList"},
		{"meta.k8s.io/v1beta1", "PartialObjectMetadata"},
		{"meta.k8s.io/v1beta1", "PartialObjectMetadataList"},
	}
	metaTypes := []reflect.Type{
		reflect.TypeOf(metav1.PartialObjectMetadata{}),
		reflect.TypeOf(metav1.PartialObjectMetadataList{}),
		reflect.TypeOf(metav1beta1.PartialObjectMetadata{}),
		reflect.TypeOf(metav1beta1.PartialObjectMetadataList{}),
	}
	isMetaKind := map[gvk]bool{}
	for i, k := range metaKinds {
		index(metaTypes[i])
		kindType[k] = metaTypes[i]
		isMetaKind[k] = true
		kinds = append(kinds, k)
	}
	describeAll()
	sort.Slice(kinds, func(a, b int) bool {
		if kinds[a].apiVersion != kinds[b].apiVersion {
			return kinds[a].apiVersion < kinds[b].apiVersion
		}
		return kinds[a].kind < kinds[b].kind
	})
	// A message is usable if nothing it reaches is unsupported.
	var bad func(t reflect.Type, seen map[reflect.Type]bool) string
	bad = func(t reflect.Type, seen map[reflect.Type]bool) string {
		if seen[t] {
			return ""
		}
		seen[t] = true
		m := messages[t]
		if m.unsupported != "" {
			return m.unsupported
		}
		for _, r := range m.reaches {
			if why := bad(r, seen); why != "" {
				return why
			}
		}
		return ""
	}

	w := os.Stdout
	fmt.Fprintln(w, "//! The protobuf schema of Kubernetes' built-in types, generated by `xtask/protobuf-schema`")
	fmt.Fprintln(w, "//! (`cargo xtask protobuf-schema`) from the Go types of k8s.io/api v0.37.2 by reflection. Do not edit.")
	fmt.Fprintln(w, "//!")
	fmt.Fprintln(w, "//! `f(number, json name, kind, flags)`; `Msg(i)` and `Inline(i)` index [`MESSAGES`].")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "use crate::schema::Kind::*;")
	fmt.Fprintln(w, "use crate::schema::flags::*;")
	fmt.Fprintln(w, "use crate::schema::{KindEntry, Message, f};")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "/// Every message, by index.")
	fmt.Fprintln(w, "#[rustfmt::skip]")
	fmt.Fprintln(w, "pub(crate) static MESSAGES: &[Message] = &[")
	status, objectMeta := -1, -1
	for i, t := range order {
		m := messages[t]
		switch m.name {
		case "k8s.io/apimachinery/pkg/apis/meta/v1.Status":
			status = i
		case "k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta":
			objectMeta = i
		}
		short := strings.TrimPrefix(strings.TrimPrefix(m.name, "k8s.io/api/"), "k8s.io/apimachinery/pkg/")
		fmt.Fprintf(w, "    Message { name: %q, fields: &[ // %d\n", short, i)
		for _, f := range m.fields {
			if f.problem != "" {
				fmt.Fprintf(w, "        // %d %q: %s\n", f.number, f.json, f.problem)
				continue
			}
			flags := "0"
			if len(f.flags) > 0 {
				flags = strings.Join(f.flags, " | ")
			}
			kind := strings.ReplaceAll(strings.TrimPrefix(f.kind, "Kind::"), "Message(", "Msg(")
			fmt.Fprintf(w, "        f(%d, %q, %s, %s),\n", f.number, f.json, kind, flags)
		}
		fmt.Fprintln(w, "    ] },")
	}
	fmt.Fprintln(w, "];")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "/// meta/v1 Status, the object of an error response and of a watch's ERROR event.\npub(crate) const STATUS: u16 = %d;\n\n", status)
	fmt.Fprintf(w, "/// meta/v1 ObjectMeta, whose field 17 is managedFields.\npub(crate) const OBJECT_META: u16 = %d;\n\n", objectMeta)
	fmt.Fprintln(w, "/// The kinds decoded from protobuf, sorted by apiVersion then kind, with their message.")
	fmt.Fprintln(w, "#[rustfmt::skip]")
	fmt.Fprintln(w, "pub(crate) static KINDS: &[KindEntry] = &[")
	skipped, listed := 0, 0
	for _, k := range kinds {
		t := kindType[k]
		if t.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" && !isMetaKind[k] {
			continue // options, Status, WatchEvent: registered in every group version, not watched
		}
		if why := bad(t, map[reflect.Type]bool{}); why != "" {
			fmt.Fprintf(w, "    // %s %s: JSON only (%s)\n", k.apiVersion, k.kind, why)
			skipped++
			continue
		}
		listed++
		fmt.Fprintf(w, "    KindEntry { api_version: %q, kind: %q, message: %d },\n", k.apiVersion, k.kind, index(t))
	}
	fmt.Fprintln(w, "];")
	if status < 0 || objectMeta < 0 {
		panic("no Status message")
	}
	fmt.Fprintf(os.Stderr, "%d messages, %d kinds (%d JSON only)\n", len(order), listed, skipped)
}
