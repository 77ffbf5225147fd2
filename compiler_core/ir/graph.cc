// Graph IR: construction, mutation, cloning and the textual dump.
#include "compiler_core/ir/graph.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

TensorType TensorType::Static(DType dtype, const std::vector<int64_t>& dims) {
  TensorType t;
  t.dtype = dtype;
  t.known = true;
  for (int64_t d : dims) t.dims.push_back(Dim::Static(d));
  return t;
}

bool TensorType::IsStatic() const {
  if (!known) return false;
  for (const Dim& d : dims) {
    if (!d.is_static()) return false;
  }
  return true;
}

std::vector<int64_t> TensorType::StaticDims() const {
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(d.value);
  return out;
}

std::string TensorType::ToString() const {
  if (!known) return "?";
  std::vector<std::string> parts;
  for (const Dim& d : dims) parts.push_back(d.is_static() ? absl::StrCat(d.value) : (d.symbol.empty() ? "?" : d.symbol));
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(parts, ","), "]");
}

void Value::set_constant(Tensor t) {
  type_ = TensorType::Static(t.dtype(), t.dims());
  constant_ = std::move(t);
}

namespace {
template <typename T>
const T* GetAttr(const std::map<std::string, AttrValue>& attrs, std::string_view name) {
  auto it = attrs.find(std::string(name));
  if (it == attrs.end()) return nullptr;
  return std::get_if<T>(&it->second);
}
}  // namespace

int64_t Node::GetInt(std::string_view name, int64_t def) const {
  const int64_t* v = GetAttr<int64_t>(attrs_, name);
  return v ? *v : def;
}
float Node::GetFloat(std::string_view name, float def) const {
  const float* v = GetAttr<float>(attrs_, name);
  return v ? *v : def;
}
std::string Node::GetString(std::string_view name, std::string def) const {
  const std::string* v = GetAttr<std::string>(attrs_, name);
  return v ? *v : def;
}
std::vector<int64_t> Node::GetInts(std::string_view name, std::vector<int64_t> def) const {
  const auto* v = GetAttr<std::vector<int64_t>>(attrs_, name);
  return v ? *v : def;
}
std::vector<float> Node::GetFloats(std::string_view name, std::vector<float> def) const {
  const auto* v = GetAttr<std::vector<float>>(attrs_, name);
  return v ? *v : def;
}

std::vector<std::string> Node::GetStrings(std::string_view name, std::vector<std::string> def) const {
  const auto* v = GetAttr<std::vector<std::string>>(attrs_, name);
  return v ? *v : def;
}

void Node::ReplaceInput(int i, Value* v) {
  Value* old = inputs_[i];
  inputs_[i] = v;
  if (old) {
    // Remove one occurrence of this node from old's users if no other input slot uses old.
    if (std::find(inputs_.begin(), inputs_.end(), old) == inputs_.end()) {
      auto& u = old->users_;
      u.erase(std::remove(u.begin(), u.end(), this), u.end());
    }
  }
  if (v && std::find(v->users_.begin(), v->users_.end(), this) == v->users_.end()) {
    v->users_.push_back(this);
  }
}

absl::StatusOr<Value*> Graph::AddValue(std::string name, TensorType type) {
  if (name.empty()) return absl::InvalidArgumentError("value name must not be empty");
  if (by_name_.count(name)) {
    return absl::InvalidArgumentError(absl::StrCat("value '", name, "' is defined twice"));
  }
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->type_ = std::move(type);
  Value* raw = v.get();
  values_.push_back(std::move(v));
  by_name_[std::move(name)] = raw;
  return raw;
}

Value* Graph::FindValue(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

std::string Graph::UniqueValueName(std::string_view hint) const {
  std::string base(hint.empty() ? "v" : hint);
  if (!by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string c = absl::StrCat(base, "_", i);
    if (!by_name_.count(c)) return c;
  }
}

absl::StatusOr<Value*> Graph::AddInput(std::string name, TensorType type) {
  auto v = AddValue(std::move(name), std::move(type));
  if (!v.ok()) return v;
  (*v)->is_graph_input_ = true;
  inputs_.push_back(*v);
  return v;
}

absl::StatusOr<Value*> Graph::AddConstant(std::string name, Tensor t) {
  auto v = AddValue(std::move(name));
  if (!v.ok()) return v;
  (*v)->set_constant(std::move(t));
  return v;
}

absl::StatusOr<Node*> Graph::AddNode(std::string op_type, std::string name,
                                     std::vector<Value*> inputs, std::vector<Value*> outputs,
                                     std::map<std::string, AttrValue> attrs, std::string domain) {
  for (Value* o : outputs) {
    if (o == nullptr) return absl::InvalidArgumentError(absl::StrCat("node '", name, "': null output"));
    if (o->producer_ != nullptr || o->is_graph_input_ || o->is_constant()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", name, "' (", op_type, "): output '", o->name(), "' is already defined"));
    }
  }
  auto n = std::make_unique<Node>();
  n->name_ = std::move(name);
  n->op_type_ = std::move(op_type);
  n->domain_ = std::move(domain);
  n->inputs_ = std::move(inputs);
  n->outputs_ = std::move(outputs);
  n->attrs_ = std::move(attrs);
  Node* raw = n.get();
  std::set<Value*> seen;
  for (Value* in : raw->inputs_) {
    if (in && seen.insert(in).second) in->users_.push_back(raw);
  }
  for (Value* o : raw->outputs_) o->producer_ = raw;
  nodes_.push_back(std::move(n));
  return raw;
}

void Graph::RemoveNode(Node* node) {
  for (Value* in : node->inputs_) {
    if (!in) continue;
    auto& u = in->users_;
    u.erase(std::remove(u.begin(), u.end(), node), u.end());
  }
  for (Value* o : node->outputs_) o->producer_ = nullptr;
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(),
                              [&](const std::unique_ptr<Node>& n) { return n.get() == node; }),
               nodes_.end());
}

void Graph::ReplaceAllUses(Value* from, Value* to) {
  std::vector<Node*> users = from->users_;
  for (Node* n : users) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (n->inputs_[i] == from) n->ReplaceInput(i, to);
    }
  }
  for (Value*& out : outputs_) {
    if (out == from) out = to;
  }
}

void Graph::RemoveDeadValues() {
  std::set<Value*> keep(inputs_.begin(), inputs_.end());
  keep.insert(outputs_.begin(), outputs_.end());
  std::vector<std::unique_ptr<Value>> kept;
  for (auto& v : values_) {
    if (keep.count(v.get()) || v->producer_ || !v->users_.empty()) {
      kept.push_back(std::move(v));
    } else {
      by_name_.erase(v->name_);
    }
  }
  values_ = std::move(kept);
}

std::vector<Value*> Graph::constants() const {
  std::vector<Value*> out;
  for (const auto& v : values_) {
    if (v->is_constant()) out.push_back(v.get());
  }
  return out;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  for (const auto& v : values_) out.push_back(v.get());
  return out;
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto g = std::make_unique<Graph>();
  g->name_ = name_;
  g->opset_version_ = opset_version_;
  std::unordered_map<const Value*, Value*> map;
  for (const auto& v : values_) {
    Value* nv = *g->AddValue(v->name_, v->type_);
    nv->constant_ = v->constant_;
    nv->is_graph_input_ = v->is_graph_input_;
    map[v.get()] = nv;
  }
  for (Value* in : inputs_) g->inputs_.push_back(map[in]);
  for (Value* out : outputs_) g->outputs_.push_back(map[out]);
  for (const auto& n : nodes_) {
    std::vector<Value*> ins, outs;
    for (Value* in : n->inputs_) ins.push_back(in ? map[in] : nullptr);
    for (Value* o : n->outputs_) outs.push_back(map[o]);
    (void)*g->AddNode(n->op_type_, n->name_, ins, outs, n->attrs_, n->domain_);
  }
  return g;
}

std::string AttrValueToString(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(float f) const { return absl::StrCat(f); }
    std::string operator()(const std::string& s) const { return absl::StrCat("\"", s, "\""); }
    std::string operator()(const Tensor& t) const { return t.DebugString(); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ","), "]");
    }
    std::string operator()(const std::vector<float>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ","), "]");
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrCat("[\"", absl::StrJoin(v, "\",\""), "\"]");
    }
  };
  return std::visit(Visitor{}, v);
}

std::string Graph::ToText() const {
  std::string s = absl::StrCat("graph ", name_, "(");
  std::vector<std::string> ins;
  for (Value* v : inputs_) ins.push_back(absl::StrCat("%", v->name(), ": ", v->type().ToString()));
  absl::StrAppend(&s, absl::StrJoin(ins, ", "), ") -> (");
  std::vector<std::string> outs;
  for (Value* v : outputs_) outs.push_back(absl::StrCat("%", v->name()));
  absl::StrAppend(&s, absl::StrJoin(outs, ", "), ") {\n");
  for (const auto& v : values_) {
    if (v->is_constant()) {
      absl::StrAppend(&s, "  %", v->name(), ": ", v->type().ToString(), " = const ",
                      v->constant().DebugString(4), "\n");
    }
  }
  for (const auto& n : nodes_) {
    std::vector<std::string> o, i, a;
    for (Value* v : n->outputs()) o.push_back(absl::StrCat("%", v->name(), ": ", v->type().ToString()));
    for (Value* v : n->inputs()) i.push_back(v ? absl::StrCat("%", v->name()) : "_");
    a.push_back(absl::StrCat("name=\"", n->name(), "\""));
    for (const auto& [k, val] : n->attrs()) a.push_back(absl::StrCat(k, "=", AttrValueToString(val)));
    std::string op = n->domain().empty() ? n->op_type() : absl::StrCat(n->domain(), ".", n->op_type());
    absl::StrAppend(&s, "  ", absl::StrJoin(o, ", "), " = ", op, "(", absl::StrJoin(i, ", "), ") {",
                    absl::StrJoin(a, ", "), "}\n");
  }
  absl::StrAppend(&s, "}\n");
  return s;
}

}  // namespace kiln
