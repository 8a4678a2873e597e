// view_property_test.cpp — thousands of random chains of view ops, each step checked
// against an independent reference model.
//
// The base tensor holds arange(n) in float64, so an element's value is its storage
// address. The model keeps the values of the current tensor as a plain row-major
// list and applies each op by index arithmetic, with no strides at all. After each
// step: the sizes match, every element's value matches, and while the tensor still
// shares the base storage, every element's address (offset + index . strides) equals
// its value. For view/reshape, a brute-force oracle decides whether any strides can
// express the new shape over the current addresses; view must succeed exactly then,
// and reshape must share storage exactly then.
#include <algorithm>
#include <functional>
#include <numeric>

#include "test_util.h"

namespace sb {
namespace {

struct Model {
  Shape sizes;
  std::vector<double> vals;  // row-major

  int64_t numel() const { return static_cast<int64_t>(vals.size()); }
  Shape unravel(int64_t f) const { return test::unravel(f, sizes); }
  int64_t ravel(const Shape& idx) const {
    int64_t f = 0;
    for (size_t d = 0; d < sizes.size(); ++d) f = f * sizes[d] + idx[d];
    return f;
  }
  // new model of `new_sizes` whose element at idx is this->vals[src(idx)]
  Model remap(const Shape& new_sizes, const std::function<Shape(const Shape&)>& src) const {
    Model m{new_sizes, {}};
    int64_t n = 1;
    for (int64_t s : new_sizes) n *= s;
    m.vals.resize(n);
    for (int64_t f = 0; f < n; ++f) m.vals[f] = vals[ravel(src(test::unravel(f, new_sizes)))];
    return m;
  }
};

int64_t rnd(std::mt19937_64& rng, int64_t lo, int64_t hi) {  // inclusive
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

// Can a strided view of `shape` reproduce these addresses (row-major)? Brute force.
bool viewable(const std::vector<double>& addr, const Shape& shape) {
  if (addr.empty()) return true;
  Shape st(shape.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 2) continue;
    Shape idx(shape.size(), 0);
    idx[d] = 1;
    int64_t f = 0;
    for (size_t k = 0; k < shape.size(); ++k) f = f * shape[k] + idx[k];
    st[d] = static_cast<int64_t>(addr[f] - addr[0]);
  }
  for (size_t f = 0; f < addr.size(); ++f) {
    const Shape idx = test::unravel(static_cast<int64_t>(f), shape);
    int64_t a = static_cast<int64_t>(addr[0]);
    for (size_t k = 0; k < shape.size(); ++k) a += idx[k] * st[k];
    if (a != static_cast<int64_t>(addr[f])) return false;
  }
  return true;
}

// A random factorisation of n into up to 4 dims (with size-1 dims sprinkled in).
Shape random_factorisation(std::mt19937_64& rng, int64_t n) {
  Shape s;
  if (n == 0) {
    s = {0};
    const int extra = static_cast<int>(rnd(rng, 0, 2));
    for (int i = 0; i < extra; ++i) s.insert(s.begin() + rnd(rng, 0, static_cast<int64_t>(s.size())), rnd(rng, 1, 3));
    return s;
  }
  int64_t rest = n;
  while (rest > 1 && s.size() < 3) {
    std::vector<int64_t> divs;
    for (int64_t d = 2; d <= rest; ++d)
      if (rest % d == 0) divs.push_back(d);
    const int64_t d = divs[rng() % divs.size()];
    s.push_back(d);
    rest /= d;
  }
  if (rest > 1) s.push_back(rest);
  if (rng() % 3 == 0) s.insert(s.begin() + rnd(rng, 0, static_cast<int64_t>(s.size())), 1);
  std::shuffle(s.begin(), s.end(), rng);
  return s;
}

void check(const Tensor& t, const Model& m, bool shares_base, const std::string& trace) {
  ASSERT_EQ(t.sizes(), m.sizes) << trace;
  const std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), m.vals.size()) << trace;
  for (size_t f = 0; f < got.size(); ++f) {
    ASSERT_EQ(got[f], m.vals[f]) << "value at " << detail::str_cat(m.unravel(static_cast<int64_t>(f))) << " after " << trace;
    if (shares_base) {
      const Shape idx = m.unravel(static_cast<int64_t>(f));
      int64_t addr = t.storage_offset();
      for (size_t k = 0; k < idx.size(); ++k) addr += idx[k] * t.strides()[k];
      ASSERT_EQ(static_cast<double>(addr), m.vals[f]) << "address at " << detail::str_cat(idx) << " after " << trace;
    }
  }
}

TEST(ViewProperty, RandomChainsMatchReferenceModel) {
  std::mt19937_64 rng(20261121);
  int chains = 0, steps = 0, views_refused = 0;
  for (chains = 0; chains < 3000; ++chains) {
    const int nd = static_cast<int>(rnd(rng, 1, 4));
    Shape sz(nd);
    for (auto& s : sz) s = rnd(rng, rng() % 12 == 0 ? 0 : 1, 5);
    const int64_t n = std::accumulate(sz.begin(), sz.end(), int64_t{1}, std::multiplies<>());
    const Tensor base = arange(n, DType::Float64).view(sz);
    Tensor t = base;
    Model m{sz, base.to_vector()};
    bool shares = true;
    std::string trace = "base " + detail::str_cat(sz);
    const int nsteps = static_cast<int>(rnd(rng, 1, 7));
    for (int s = 0; s < nsteps; ++s, ++steps) {
      const int64_t d = t.dim();
      const int op = static_cast<int>(rng() % 11);
      if (d == 0 && op != 6 && op != 8) continue;
      switch (op) {
        case 0: {  // transpose
          const int64_t a = rnd(rng, 0, d - 1), b = rnd(rng, 0, d - 1);
          t = t.transpose(a, b - d);  // negative dims too
          Shape ns = m.sizes;
          std::swap(ns[a], ns[b]);
          m = m.remap(ns, [&](Shape i) { std::swap(i[a], i[b]); return i; });
          trace += detail::str_cat(" transpose(", a, ",", b, ")");
          break;
        }
        case 1: {  // permute
          Shape p(d);
          std::iota(p.begin(), p.end(), 0);
          std::shuffle(p.begin(), p.end(), rng);
          t = t.permute(p);
          Shape ns(d);
          for (int64_t i = 0; i < d; ++i) ns[i] = m.sizes[p[i]];
          m = m.remap(ns, [&](const Shape& i) {
            Shape o(d);
            for (int64_t k = 0; k < d; ++k) o[p[k]] = i[k];
            return o;
          });
          trace += detail::str_cat(" permute(", p, ")");
          break;
        }
        case 2: {  // slice with step; start/end possibly negative or out of range
          const int64_t dim = rnd(rng, 0, d - 1), len = m.sizes[dim];
          const int64_t start = rnd(rng, -len - 2, len + 2), end = rnd(rng, -len - 2, len + 2), step = rnd(rng, 1, 3);
          t = t.slice(dim, start, end, step);
          auto norm = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
          const int64_t b = norm(start), e = std::max(norm(end), b);
          std::vector<int64_t> picked;
          for (int64_t i = b; i < e; i += step) picked.push_back(i);
          Shape ns = m.sizes;
          ns[dim] = static_cast<int64_t>(picked.size());
          m = m.remap(ns, [&](Shape i) { i[dim] = picked[i[dim]]; return i; });
          trace += detail::str_cat(" slice(", dim, ",", start, ",", end, ",", step, ")");
          break;
        }
        case 3: {  // select
          const int64_t dim = rnd(rng, 0, d - 1);
          if (m.sizes[dim] == 0) continue;
          const int64_t idx = rnd(rng, 0, m.sizes[dim] - 1);
          t = t.select(dim, idx);
          Shape ns = m.sizes;
          ns.erase(ns.begin() + dim);
          m = m.remap(ns, [&](Shape i) { i.insert(i.begin() + dim, idx); return i; });
          trace += detail::str_cat(" select(", dim, ",", idx, ")");
          break;
        }
        case 4: {  // narrow
          const int64_t dim = rnd(rng, 0, d - 1), len = m.sizes[dim];
          const int64_t start = rnd(rng, 0, len), length = rnd(rng, 0, len - start);
          t = t.narrow(dim, start, length);
          Shape ns = m.sizes;
          ns[dim] = length;
          m = m.remap(ns, [&](Shape i) { i[dim] += start; return i; });
          trace += detail::str_cat(" narrow(", dim, ",", start, ",", length, ")");
          break;
        }
        case 5: {  // expand a size-1 dim, or add a leading dim
          Shape target = m.sizes;
          for (auto& x : target)
            if (x == 1 && rng() % 2) x = rnd(rng, 2, 3);
          const bool lead = rng() % 2;
          if (lead) target.insert(target.begin(), rnd(rng, 1, 3));
          t = t.expand(target);
          const size_t off = lead ? 1 : 0;
          m = m.remap(target, [&](const Shape& i) {
            Shape o(i.begin() + off, i.end());
            for (size_t k = 0; k < o.size(); ++k)
              if (m.sizes[k] == 1) o[k] = 0;
            return o;
          });
          shares = shares && true;
          trace += detail::str_cat(" expand(", target, ")");
          break;
        }
        case 6: {  // unsqueeze
          const int64_t dim = rnd(rng, 0, d);
          t = t.unsqueeze(dim);
          Shape ns = m.sizes;
          ns.insert(ns.begin() + dim, 1);
          m = m.remap(ns, [&](Shape i) { i.erase(i.begin() + dim); return i; });
          trace += detail::str_cat(" unsqueeze(", dim, ")");
          break;
        }
        case 7: {  // squeeze one dim (or all)
          if (rng() % 2) {
            const int64_t dim = rnd(rng, 0, d - 1);
            t = t.squeeze(dim);
            if (m.sizes[dim] == 1) {
              Shape ns = m.sizes;
              ns.erase(ns.begin() + dim);
              m = m.remap(ns, [&](Shape i) { i.insert(i.begin() + dim, 0); return i; });
            }
            trace += detail::str_cat(" squeeze(", dim, ")");
          } else {
            t = t.squeeze();
            Shape ns;
            for (int64_t x : m.sizes)
              if (x != 1) ns.push_back(x);
            m = Model{ns, m.vals};
            trace += " squeeze()";
          }
          break;
        }
        case 8:
        case 9: {  // view (or reshape when view must fail)
          const Shape ns = random_factorisation(rng, m.numel());
          const bool possible = viewable(m.vals, ns) || !shares;
          // once copied, the values are no longer addresses: view may still work
          if (shares) {
            if (possible) {
              t = t.view(ns);
            } else {
              EXPECT_THROW(t.view(ns), Error) << trace << " view(" << detail::str_cat(ns) << ")";
              ++views_refused;
              Tensor r = t.reshape(ns);
              EXPECT_FALSE(r.shares_storage_with(base)) << trace;
              t = r;
              shares = false;
            }
            if (possible) {
              Tensor r = t.reshape(ns);
              EXPECT_TRUE(r.shares_storage_with(base)) << trace << " reshape(" << detail::str_cat(ns) << ") copied";
            }
          } else {
            t = t.reshape(ns);
          }
          m = Model{ns, m.vals};
          trace += detail::str_cat(op == 8 ? " view(" : " reshape(", ns, ")");
          break;
        }
        case 10: {  // flatten a range of dims
          const int64_t a = rnd(rng, 0, d - 1), b = rnd(rng, a, d - 1);
          Shape ns(m.sizes.begin(), m.sizes.begin() + a);
          int64_t prod = 1;
          for (int64_t k = a; k <= b; ++k) prod *= m.sizes[k];
          ns.push_back(prod);
          ns.insert(ns.end(), m.sizes.begin() + b + 1, m.sizes.end());
          const bool possible = viewable(m.vals, ns);
          t = t.flatten(a, b);
          if (shares && a != b) {
            EXPECT_EQ(t.shares_storage_with(base), possible) << trace << " flatten";
          }
          if (!t.shares_storage_with(base)) shares = false;
          m = Model{ns, m.vals};
          trace += detail::str_cat(" flatten(", a, ",", b, ")");
          break;
        }
      }
      check(t, m, shares, trace);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_GT(views_refused, 50) << "the chains rarely exercised view's refusal";
  RecordProperty("steps", steps);
}

// as_strided over the base: addresses are exactly offset + index . strides.
TEST(ViewProperty, AsStridedAddressesMatch) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 2000; ++trial) {
    const Tensor base = arange(200, DType::Float64);
    const int nd = static_cast<int>(rnd(rng, 0, 3));
    Shape sz(nd), st(nd);
    for (int i = 0; i < nd; ++i) {
      sz[i] = rnd(rng, 0, 5);
      st[i] = rnd(rng, 0, 12);
    }
    const int64_t off = rnd(rng, 0, 30);
    int64_t last = off;
    bool empty_t = false;
    for (int i = 0; i < nd; ++i) {
      last += std::max<int64_t>(sz[i] - 1, 0) * st[i];
      empty_t |= sz[i] == 0;
    }
    if (!empty_t && last >= 200) {
      EXPECT_THROW(base.as_strided(sz, st, off), Error);
      continue;
    }
    Tensor t = base.as_strided(sz, st, off);
    const auto v = t.to_vector();
    for (size_t f = 0; f < v.size(); ++f) {
      const Shape idx = test::unravel(static_cast<int64_t>(f), sz);
      int64_t a = off;
      for (int i = 0; i < nd; ++i) a += idx[i] * st[i];
      ASSERT_EQ(v[f], static_cast<double>(a));
    }
  }
}

}  // namespace
}  // namespace sb
