package rawjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Name is the codec's name; Connect's content types for it are
// application/rawjson (unary) and application/connect+rawjson (streams).
const Name = "rawjson"

// ErrInvalid: input that is not raw JSON of the message.
var ErrInvalid = errors.New("rawjson: invalid input")

// base64Suffix names the field that carries a bytes field as base64.
const base64Suffix = "Base64"

// Codec is a connect.Codec for raw JSON.
type Codec struct{}

// Name implements connect.Codec.
func (Codec) Name() string { return Name }

// Marshal implements connect.Codec.
func (Codec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rawjson: %T is not a protobuf message", v)
	}
	return Marshal(m)
}

// Unmarshal implements connect.Codec.
func (Codec) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("rawjson: %T is not a protobuf message", v)
	}
	return Unmarshal(b, m)
}

// Marshal encodes m as raw JSON (see the package doc).
func Marshal(m proto.Message) ([]byte, error) {
	var b bytes.Buffer
	if err := writeMessage(&b, m.ProtoReflect()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeMessage(b *bytes.Buffer, m protoreflect.Message) error {
	b.WriteByte('{')
	fds := m.Descriptor().Fields()
	first := true
	key := func(name string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeString(b, name)
		b.WriteByte(':')
	}
	for i := range fds.Len() {
		fd := fds.Get(i)
		if fd.HasPresence() && !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			return fmt.Errorf("rawjson: map field %s is not supported", fd.FullName())
		case fd.IsList():
			key(fd.JSONName())
			b.WriteByte('[')
			l := v.List()
			for j := range l.Len() {
				if j > 0 {
					b.WriteByte(',')
				}
				if err := writeValue(b, fd, l.Get(j)); err != nil {
					return err
				}
			}
			b.WriteByte(']')
		case fd.Kind() == protoreflect.BytesKind:
			if p := v.Bytes(); utf8.Valid(p) {
				key(fd.JSONName())
				writeString(b, string(p))
			} else {
				key(fd.JSONName() + base64Suffix)
				writeString(b, base64.StdEncoding.EncodeToString(p))
			}
		default:
			key(fd.JSONName())
			if err := writeValue(b, fd, v); err != nil {
				return err
			}
		}
	}
	b.WriteByte('}')
	return nil
}

// writeValue writes one singular value (or one list element) of fd.
func writeValue(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			writeString(b, strconv.FormatFloat(f, 'g', -1, 64))
		} else {
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case protoreflect.StringKind:
		writeString(b, v.String())
	case protoreflect.BytesKind: // a list element: no F/FBase64 choice per element
		writeString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			writeString(b, string(ev.Name()))
		} else {
			b.WriteString(strconv.Itoa(int(v.Enum())))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return writeMessage(b, v.Message())
	default:
		return fmt.Errorf("rawjson: field %s of kind %v is not supported", fd.FullName(), fd.Kind())
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	j, _ := json.Marshal(s) // a string always marshals
	b.Write(j)
}

// Unmarshal decodes raw JSON into m: the input becomes protojson (text in
// a bytes field F becomes base64, FBase64 becomes F), which protojson then
// decodes, ignoring unknown fields.
func Unmarshal(b []byte, m proto.Message) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the JSON value", ErrInvalid)
	}
	x, err := toProtoJSON(x, m.ProtoReflect().Descriptor())
	if err != nil {
		return err
	}
	pj, err := json.Marshal(x)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(pj, m); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// toProtoJSON rewrites the bytes fields of x, a decoded JSON object of
// message md, into protojson's base64.
func toProtoJSON(x any, md protoreflect.MessageDescriptor) (any, error) {
	obj, ok := x.(map[string]any)
	if !ok {
		return x, nil // protojson reports the wrong shape
	}
	fds := md.Fields()
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		fd := field(fds, k)
		if fd == nil {
			if base, ok := strings.CutSuffix(k, base64Suffix); ok {
				if bfd := field(fds, base); bfd != nil && bfd.Kind() == protoreflect.BytesKind && !bfd.IsList() {
					if _, dup := obj[base]; dup {
						return nil, fmt.Errorf("%w: both %q and %q", ErrInvalid, base, k)
					}
					out[bfd.JSONName()] = v // base64 already
					continue
				}
			}
			out[k] = v // unknown: protojson ignores it
			continue
		}
		switch {
		case fd.Kind() == protoreflect.BytesKind && !fd.IsList():
			s, ok := v.(string)
			if !ok && v != nil {
				return nil, fmt.Errorf("%w: %q must be a string (its text)", ErrInvalid, k)
			}
			if ok {
				v = base64.StdEncoding.EncodeToString([]byte(s))
			}
		case fd.Message() != nil && !fd.IsMap():
			if l, ok := v.([]any); ok && fd.IsList() {
				conv := make([]any, len(l))
				for i, e := range l {
					var err error
					if conv[i], err = toProtoJSON(e, fd.Message()); err != nil {
						return nil, err
					}
				}
				v = conv
			} else if !fd.IsList() {
				var err error
				if v, err = toProtoJSON(v, fd.Message()); err != nil {
					return nil, err
				}
			}
		}
		out[k] = v
	}
	return out, nil
}

// field finds a field by its JSON name or its proto name.
func field(fds protoreflect.FieldDescriptors, k string) protoreflect.FieldDescriptor {
	if fd := fds.ByJSONName(k); fd != nil {
		return fd
	}
	return fds.ByName(protoreflect.Name(k))
}
