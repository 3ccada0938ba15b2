#include "tessera/io/pickle.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace tessera::io {

// LibTorch 1.13's unpickler turns a call of collections.OrderedDict into None (it expects
// one only as a tensor's empty backward hooks) and knows neither SETITEM nor BUILD on a
// dict, so what `torch.save(net.state_dict(), path)` writes does not load
// (pytorch/pytorch#100741, fixed in PyTorch 2.6). Such a pickle opens with
//   PROTO 2, GLOBAL 'collections OrderedDict', BINPUT 0, EMPTY_TUPLE, REDUCE,
// calls the class again as `BINGET 0, EMPTY_TUPLE, REDUCE`, and closes with the state
// {'_metadata': module versions} and BUILD, STOP. Rewritten opcode by opcode, following
// where each stack entry begins: every call of the class becomes EMPTY_DICT (memo 0 is
// never read again), `key value SETITEM` becomes `MARK key value SETITEMS`, and the state
// and BUILD are dropped. Any other pickle, or one holding an opcode this walk does not
// know, is left as it is for the unpickler to judge.
namespace {

// The walk of plain_dict_pickle: the output so far and, for each stack entry (or MARK), the
// output offset where it begins.
class DictRewrite {
 public:
  explicit DictRewrite(const std::string& pkl) : pkl_(pkl) {}

  // The rewritten pickle, or the original when it holds anything this walk does not know.
  std::string run(size_t from) {
    out_ = std::string("\x80\x02}q", 4) + std::string(1, '\0');
    stack_ = {{2, false}};
    for (size_t i = from; i < pkl_.size();) {
      const unsigned char op = static_cast<unsigned char>(pkl_[i]);
      if (op == '.') return out_ + '.';
      if (op == 'b') return build(i);
      if (op == 's' || (op == 'h' && pkl_.compare(i + 1, 3, std::string(1, '\0') + ")R") == 0)) {
        if (!rewrite(op)) return pkl_;
        i += op == 's' ? 1 : 4;
        continue;
      }
      const std::optional<size_t> arg = copied(op, i);
      if (!arg || i + 1 + *arg > pkl_.size()) return pkl_;
      out_.append(pkl_, i, 1 + *arg);
      i += 1 + *arg;
    }
    return pkl_;
  }

 private:
  struct Entry {
    size_t start;
    bool mark;
  };

  bool pop(size_t n) {
    if (stack_.size() < n) return false;
    stack_.resize(stack_.size() - n);
    return true;
  }
  size_t pop_to_mark() {  // removes the MARK too; returns its start
    while (!stack_.empty() && !stack_.back().mark) stack_.pop_back();
    if (stack_.empty()) return std::string::npos;
    const size_t start = stack_.back().start;
    stack_.pop_back();
    return start;
  }
  size_t length_at(size_t pos, size_t width) const {
    uint32_t v = 0;
    if (pos + width <= pkl_.size()) std::memcpy(&v, pkl_.data() + pos, width);  // little endian
    return width + size_t{v};
  }

  // The two rewritten opcodes: a call of OrderedDict() (BINGET 0, EMPTY_TUPLE, REDUCE) becomes
  // EMPTY_DICT; `dict key value SETITEM` becomes `dict MARK key value SETITEMS`.
  bool rewrite(unsigned char op) {
    if (op == 'h') {
      stack_.push_back({out_.size(), false});
      out_ += '}';
      return true;
    }
    if (stack_.size() < 3) return false;
    out_.insert(stack_[stack_.size() - 2].start, 1, '(');
    out_ += 'u';
    return pop(2);
  }

  // BUILD of the dict with its state: the state is dropped; only as the last opcode before STOP.
  std::string build(size_t i) {
    if (stack_.size() != 2 || i + 2 != pkl_.size() || pkl_[i + 1] != '.') return pkl_;
    out_.resize(stack_.back().start);
    return out_ + '.';
  }

  // An opcode copied as it is: its stack effect, and the bytes of its argument; nullopt for an
  // opcode outside this walk or a stack it does not fit.
  std::optional<size_t> copied(unsigned char op, size_t i) {
    const size_t at = out_.size();
    switch (op) {
      case ')': case ']': case '}': case 'N': case 0x88: case 0x89: stack_.push_back({at, false}); return 0;
      case 'h': case 'K': stack_.push_back({at, false}); return 1;
      case 'M': stack_.push_back({at, false}); return 2;
      case 'j': case 'J': stack_.push_back({at, false}); return 4;
      case 'G': stack_.push_back({at, false}); return 8;
      case 'X': case 'T': case 'B': stack_.push_back({at, false}); return length_at(i + 1, 4);
      case 'U': case 'C': case 0x8a: stack_.push_back({at, false}); return length_at(i + 1, 1);
      case 'c': {
        const size_t a = pkl_.find('\n', i + 1), b = a == std::string::npos ? a : pkl_.find('\n', a + 1);
        if (b == std::string::npos) return std::nullopt;
        stack_.push_back({at, false});
        return b - i;
      }
      case 'q': return 1;
      case 'r': return 4;
      case '(': stack_.push_back({at, true}); return 0;
      case 't': {
        const size_t start = pop_to_mark();
        if (start == std::string::npos) return std::nullopt;
        stack_.push_back({start, false});
        return 0;
      }
      case 'u': case 'e': return pop_to_mark() == std::string::npos ? std::nullopt : std::optional<size_t>(0);
      case 0x85: case 0x86: case 0x87: case 'R': case 'Q': {  // pop n, push one at the first's start
        const size_t n = op == 0x85 || op == 'Q' ? 1 : op == 0x87 ? 3 : 2;
        if (stack_.size() < n) return std::nullopt;
        const size_t start = stack_[stack_.size() - n].start;
        pop(n);
        stack_.push_back({start, false});
        return 0;
      }
      default:
        return std::nullopt;
    }
  }

  const std::string& pkl_;
  std::string out_;
  std::vector<Entry> stack_;
};

}  // namespace

std::string plain_dict_pickle(const std::string& pkl) {
  static const std::string head =
      std::string("\x80\x02", 2) + "ccollections\nOrderedDict\nq" + std::string(1, '\0') + ")R";
  if (pkl.compare(0, head.size(), head) != 0) return pkl;
  return DictRewrite(pkl).run(head.size());
}

}  // namespace tessera::io
