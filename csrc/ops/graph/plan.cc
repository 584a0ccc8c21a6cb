#include "ops/graph/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/checked.h"
#include "core/isa.h"
#include "core/threadpool.h"

namespace nnkern::graph {

namespace {
constexpr size_t kAlign = 64;

std::string shapes_of(const std::vector<int>& ids, const std::vector<TensorDesc>& descs) {
  std::string s;
  for (int id : ids)
    if (id >= 0) s += (s.empty() ? "" : " ") + descs[size_t(id)].str();
  return s;
}
}  // namespace

std::shared_ptr<const Constant> make_constant(const TensorDesc& desc, const void* bytes) {
  const size_t n = desc.bytes();
  void* p = std::aligned_alloc(kAlign, checked_round_up(n ? n : 1, kAlign));
  if (!p) throw std::bad_alloc();
  if (n && bytes) std::memcpy(p, bytes, n);
  auto c = std::make_shared<Constant>();
  c->desc = desc;
  c->data = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  return c;
}

Plan::Plan(std::shared_ptr<SharedLayers> layers, int num_threads, int isa_cap)
    : layers_(std::move(layers)), num_threads_(num_threads), isa_cap_(isa_cap) {}

int Plan::add_input(const TensorDesc& d, size_t index, const std::string& name) {
  d.bytes();
  Tensor t{d, Kind::input, name};
  t.index = index;
  tensors_.push_back(std::move(t));
  inputs_.push_back(int(tensors_.size() - 1));
  return int(tensors_.size() - 1);
}

int Plan::add_constant(std::shared_ptr<const Constant> c, const std::string& name) {
  Tensor t{c->desc, Kind::constant, name};
  t.constant = std::move(c);
  tensors_.push_back(std::move(t));
  return int(tensors_.size() - 1);
}

std::vector<int> Plan::add_step(const std::string& op, const std::string& name,
                                const std::map<std::string, Attribute>& attrs, const std::vector<int>& in,
                                size_t num_outputs, const std::string& nodes, const std::vector<std::string>& out_names) {
  if (finalized_) throw std::logic_error("Plan::add_step after finalize");
  NodeSpec spec{op, name, attrs};
  for (int id : in) {
    if (id < -1 || id >= int(tensors_.size())) throw std::invalid_argument("add_step: no tensor " + std::to_string(id));
    spec.inputs.push_back(id < 0 ? TensorDesc{} : tensors_[size_t(id)].desc);
    spec.constants.push_back(id < 0 ? nullptr : tensors_[size_t(id)].constant);
  }
  spec.num_outputs = num_outputs;
  std::vector<TensorDesc> outs = infer_outputs(spec);
  std::optional<ScopedIsaCap> cap;
  if (isa_cap_ >= 0) cap.emplace(Isa(isa_cap_));
  std::optional<ScopedThreadLimit> limit;  // what a step does while it is made (a timed choice) runs as its runs
  if (num_threads_ > 0) limit.emplace(num_threads_);
  std::unique_ptr<Step> step = find_op(spec).make(spec, outs, *layers_);
  std::vector<int> ids;
  for (size_t j = 0; j < outs.size(); ++j) {
    Tensor t{outs[j], Kind::intermediate, j < out_names.size() ? out_names[j] : name + ":" + std::to_string(j)};
    tensors_.push_back(std::move(t));
    ids.push_back(int(tensors_.size() - 1));
  }
  info_.push_back(StepInfo{op, name, nodes, in, ids, step->detail()});
  steps_.push_back(std::move(step));
  return ids;
}

void Plan::mark_output(int tensor, size_t index) {
  Tensor& t = tensors_.at(size_t(tensor));
  if (t.kind != Kind::intermediate || t.output >= 0)
    throw std::invalid_argument("mark_output: tensor " + std::to_string(tensor) + " is not a step's output");
  t.output = int(index);
  if (outputs_.size() <= index) outputs_.resize(index + 1, -1);
  outputs_[index] = tensor;
}

std::map<int, std::pair<int, size_t>> Plan::plan_joins() {
  const size_t T = tensors_.size();
  std::vector<int> reads(T, 0);
  std::vector<size_t> producer(T, 0), out_index(T, 0);
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (int id : info_[s].in)
      if (id >= 0) ++reads[size_t(id)];
    for (size_t j = 0; j < info_[s].out.size(); ++j) {
      producer[size_t(info_[s].out[j])] = s;
      out_index[size_t(info_[s].out[j])] = j;
    }
  }
  std::map<int, std::pair<int, size_t>> slices;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const RowsJoin* join = steps_[s]->joins_rows();
    if (!join) continue;
    std::string placed;
    for (size_t i = 0; i < info_[s].in.size(); ++i) {
      const int id = info_[s].in[i];
      if (id < 0 || join->bytes[i] == 0) continue;
      const Tensor& t = tensors_[size_t(id)];
      if (t.kind != Kind::intermediate || t.output >= 0 || reads[size_t(id)] != 1) continue;
      Step& p = *steps_[producer[size_t(id)]];
      const size_t j = out_index[size_t(id)];
      // Not a join (no slices of slices) nor a view (its bytes are its input's); one row is a contiguous block
      // any other producer writes as it is, more rows need the producer's pitch.
      if (p.joins_rows() || (p.is_view() && j == 0)) continue;
      if (join->rows > 1 && !p.write_rows(j, join->bytes[i], join->pitch)) continue;
      slices[id] = {info_[s].out.at(0), join->at[i]};
      placed += (placed.empty() ? "" : ",") + std::to_string(i);
    }
    if (!placed.empty())
      info_[s].detail += (info_[s].detail.empty() ? "" : ", ") + std::string("inputs ") + placed + " in place";
  }
  return slices;
}

void Plan::finalize(bool join_in_place) {
  if (finalized_) return;
  for (int o : outputs_)
    if (o < 0) throw std::invalid_argument("Plan::finalize: a graph output has no tensor");
  const size_t T = tensors_.size(), S = steps_.size();
  std::vector<long> last_read(T, -1), def(T, -1), end(T, -1);
  for (size_t s = 0; s < S; ++s) {
    for (int id : info_[s].in)
      if (id >= 0) last_read[size_t(id)] = long(s);
    for (int id : info_[s].out) def[size_t(id)] = long(s);
  }
  // A root's bytes are in use from the first step writing any tensor on them (a slice's producer comes before
  // the Concat that defines its root).
  std::vector<long> start = def;
  const std::map<int, std::pair<int, size_t>> slices =
      join_in_place ? plan_joins() : std::map<int, std::pair<int, size_t>>{};
  auto arena_root = [&](int id) {
    const Tensor& t = tensors_[size_t(id)];
    return t.kind == Kind::intermediate && t.output < 0 && t.root == id;
  };
  auto root_of = [&](int id) { return tensors_[size_t(id)].kind == Kind::intermediate ? tensors_[size_t(id)].root : id; };
  for (size_t s = 0; s < S; ++s) {
    const StepInfo& si = info_[s];
    for (size_t j = 0; j < si.out.size(); ++j) {
      const int id = si.out[j];
      Tensor& t = tensors_[size_t(id)];
      int root = id;
      const auto slice = slices.find(id);
      if (slice != slices.end()) {
        root = slice->second.first;
        t.slice = slice->second.second;
        start[size_t(root)] = std::min(start[size_t(root)], long(s));
      } else if (t.output < 0) {
        const bool view = steps_[s]->is_view() && j == 0;
        const int over = steps_[s]->in_place_input(j);
        const int src = view ? si.in.at(0) : over >= 0 ? si.in.at(size_t(over)) : -1;
        if (src >= 0) {
          const int r = root_of(src);
          if (view) {
            root = r;
          } else if (arena_root(r) && tensors_[size_t(src)].desc.bytes() == t.desc.bytes() && end[size_t(r)] == long(s)) {
            root = r;
          }
        }
      }
      t.root = root;
      const size_t r = size_t(root);
      end[r] = std::max({end[r], last_read[size_t(id)], long(s)});
    }
  }
  // Greedy by size: the largest first, each at the lowest offset free over its lifetime.
  struct Block {
    size_t id, bytes;
    long from, to;
    size_t offset;
  };
  std::vector<Block> blocks;
  unplanned_ = 0;
  for (size_t id = 0; id < T; ++id) {
    const Tensor& t = tensors_[id];
    if (t.kind != Kind::intermediate || t.output >= 0) continue;
    const size_t bytes = checked_round_up(t.desc.bytes(), kAlign);
    unplanned_ = checked_add(unplanned_, bytes);
    if (arena_root(int(id))) blocks.push_back({id, bytes, start[id], end[id], 0});
  }
  std::stable_sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.bytes > b.bytes; });
  std::vector<const Block*> placed;
  arena_bytes_ = 0;
  for (Block& b : blocks) {
    std::vector<const Block*> live;
    for (const Block* p : placed)
      if (p->from <= b.to && b.from <= p->to) live.push_back(p);
    std::sort(live.begin(), live.end(), [](const Block* x, const Block* y) { return x->offset < y->offset; });
    size_t offset = 0;
    for (const Block* p : live) {
      if (checked_add(offset, b.bytes) <= p->offset) break;
      offset = std::max(offset, p->offset + p->bytes);
    }
    b.offset = offset;
    tensors_[b.id].offset = offset;
    arena_bytes_ = std::max(arena_bytes_, checked_add(offset, b.bytes));
    placed.push_back(&b);
  }
  finalized_ = true;
}

bool Plan::shares_memory(int a, int b) const {
  const Tensor& x = tensors_.at(size_t(a));
  const Tensor& y = tensors_.at(size_t(b));
  if (x.kind != Kind::intermediate || y.kind != Kind::intermediate) return false;
  const Tensor& rx = tensors_[size_t(x.root)];
  const Tensor& ry = tensors_[size_t(y.root)];
  if (x.root == y.root) return true;
  if (rx.output >= 0 || ry.output >= 0) return false;
  return rx.offset < ry.offset + ry.desc.bytes() && ry.offset < rx.offset + rx.desc.bytes();
}

void Plan::resolve(void** ptr, uint8_t* arena, const std::vector<const void*>& inputs,
                   const std::vector<void*>& outputs) const {
  // Roots first: a slice's root (the Concat's output) comes after it.
  for (size_t id = 0; id < tensors_.size(); ++id) {
    const Tensor& t = tensors_[id];
    switch (t.kind) {
      case Kind::input: ptr[id] = const_cast<void*>(inputs[t.index]); break;
      case Kind::constant: ptr[id] = const_cast<void*>(t.constant->data.get()); break;
      case Kind::intermediate:
        if (t.root != int(id)) break;
        ptr[id] = t.output >= 0 ? outputs[size_t(t.output)] : arena + t.offset;
        break;
    }
  }
  for (size_t id = 0; id < tensors_.size(); ++id) {
    const Tensor& t = tensors_[id];
    if (t.kind == Kind::intermediate && t.root != int(id)) ptr[id] = static_cast<uint8_t*>(ptr[t.root]) + t.slice;
  }
}

std::unique_ptr<AlignedBuffer<uint8_t>> Plan::take_arena() const {
  {
    std::lock_guard<std::mutex> lock(arenas_m_);
    if (!arenas_.empty()) {
      auto a = std::move(arenas_.back());
      arenas_.pop_back();
      return a;
    }
  }
  return std::make_unique<AlignedBuffer<uint8_t>>(arena_bytes_ ? arena_bytes_ : 1);
}

void Plan::give_arena(std::unique_ptr<AlignedBuffer<uint8_t>> a) const {
  std::lock_guard<std::mutex> lock(arenas_m_);
  arenas_.push_back(std::move(a));
}

void Plan::run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, bool verbose,
               std::vector<StepTime>* times) const {
  if (!finalized_) throw std::logic_error("Plan::run before finalize");
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size())
    throw std::invalid_argument("Plan::run: " + std::to_string(inputs_.size()) + " inputs and " +
                                std::to_string(outputs_.size()) + " outputs expected");
  struct ArenaLease {
    const Plan* plan;
    std::unique_ptr<AlignedBuffer<uint8_t>> arena;
    ~ArenaLease() { plan->give_arena(std::move(arena)); }
  } lease{this, take_arena()};
  std::optional<ScopedThreadLimit> limit;
  if (num_threads_ > 0) limit.emplace(num_threads_);
  std::optional<ScopedIsaCap> cap;
  if (isa_cap_ >= 0) cap.emplace(Isa(isa_cap_));
  std::vector<void*> ptr(tensors_.size());
  resolve(ptr.data(), lease.arena->data(), inputs, outputs);
  using clock = std::chrono::steady_clock;
  const bool timed = verbose || times;
  std::vector<TensorDesc> descs;
  if (verbose)
    for (const Tensor& t : tensors_) descs.push_back(t.desc);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const StepInfo& si = info_[s];
    const StepData d{ptr.data(), si.in.data(), si.out.data(), si.in.size()};
    const auto t0 = timed ? clock::now() : clock::time_point{};
    steps_[s]->run(d);
    if (!timed) continue;
    const double sec = std::chrono::duration<double>(clock::now() - t0).count();
    if (times) times->push_back({s, sec});
    if (verbose)
      std::fprintf(stderr, "nnkern_verbose,exec,graph.%s,%s,%s,%s -> %s,threads:%d,%.3f\n", si.op.c_str(),
                   si.detail.empty() ? "-" : si.detail.c_str(), si.name.c_str(), shapes_of(si.in, descs).c_str(),
                   shapes_of(si.out, descs).c_str(), get_num_threads(), sec * 1e3);
  }
}

std::vector<std::shared_ptr<const Constant>> evaluate(const std::string& op, const std::string& name,
                                                      const std::map<std::string, Attribute>& attrs,
                                                      const std::vector<std::shared_ptr<const Constant>>& inputs,
                                                      size_t num_outputs) {
  Plan plan(std::make_shared<SharedLayers>());
  std::vector<int> in;
  for (const auto& c : inputs) in.push_back(c ? plan.add_constant(c, "") : -1);
  const std::vector<int> out = plan.add_step(op, name, attrs, in, num_outputs, name, {});
  std::vector<std::shared_ptr<const Constant>> result;
  std::vector<void*> ptrs;
  for (size_t j = 0; j < out.size(); ++j) {
    plan.mark_output(out[j], j);
    auto c = make_constant(plan.desc(out[j]), nullptr);
    ptrs.push_back(const_cast<void*>(c->data.get()));
    result.push_back(std::move(c));
  }
  plan.finalize();
  plan.run({}, ptrs, false, nullptr);
  return result;
}

}  // namespace nnkern::graph
