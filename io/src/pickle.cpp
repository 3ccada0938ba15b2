#include "tessera/io/pickle.hpp"

#include <cstdint>
#include <cstring>
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
std::string plain_dict_pickle(const std::string& pkl) {
  static const std::string head =
      std::string("\x80\x02", 2) + "ccollections\nOrderedDict\nq" + std::string(1, '\0') + ")R";
  if (pkl.compare(0, head.size(), head) != 0) return pkl;
  std::string out = std::string("\x80\x02}q", 4) + std::string(1, '\0');
  // Output offset where each stack entry (or MARK) begins.
  struct Entry {
    size_t start;
    bool mark;
  };
  std::vector<Entry> stack{{2, false}};
  auto pop = [&](size_t n) {
    if (stack.size() < n) return false;
    stack.resize(stack.size() - n);
    return true;
  };
  auto pop_to_mark = [&] {  // removes the MARK too; returns its start
    while (!stack.empty() && !stack.back().mark) stack.pop_back();
    if (stack.empty()) return std::string::npos;
    const size_t start = stack.back().start;
    stack.pop_back();
    return start;
  };
  for (size_t i = head.size(); i < pkl.size();) {
    const unsigned char op = static_cast<unsigned char>(pkl[i]);
    const size_t at = out.size();
    size_t arg = 0;  // bytes after the opcode
    auto length_at = [&](size_t pos, size_t width) {
      uint32_t v = 0;
      if (pos + width <= pkl.size()) std::memcpy(&v, pkl.data() + pos, width);  // little endian
      return width + size_t{v};
    };
    // Stack effect: pushes after `pops` pops (0x85..0x87, R and Q keep the first's start).
    switch (op) {
      case 'h':
        if (pkl.compare(i + 1, 3, std::string(1, '\0') + ")R") == 0) {  // OrderedDict()
          out += '}';
          stack.push_back({at, false});
          i += 4;
          continue;
        }
        arg = 1;
        stack.push_back({at, false});
        break;
      case ')': case ']': case '}': case 'N': case 0x88: case 0x89:
        stack.push_back({at, false});
        break;
      case 'K': arg = 1; stack.push_back({at, false}); break;
      case 'M': arg = 2; stack.push_back({at, false}); break;
      case 'j': case 'J': arg = 4; stack.push_back({at, false}); break;
      case 'G': arg = 8; stack.push_back({at, false}); break;
      case 'X': case 'T': case 'B': arg = length_at(i + 1, 4); stack.push_back({at, false}); break;
      case 'U': case 'C': case 0x8a: arg = length_at(i + 1, 1); stack.push_back({at, false}); break;
      case 'c': {
        const size_t a = pkl.find('\n', i + 1), b = a == std::string::npos ? a : pkl.find('\n', a + 1);
        if (b == std::string::npos) return pkl;
        arg = b - i;
        stack.push_back({at, false});
        break;
      }
      case 'q': arg = 1; break;
      case 'r': arg = 4; break;
      case '(': stack.push_back({at, true}); break;
      case 't': {
        const size_t start = pop_to_mark();
        if (start == std::string::npos) return pkl;
        stack.push_back({start, false});
        break;
      }
      case 'u': case 'e':
        if (pop_to_mark() == std::string::npos) return pkl;
        break;
      case 0x85: case 0x86: case 0x87: case 'R': case 'Q': {
        const size_t n = op == 0x85 || op == 'Q' ? 1 : op == 0x87 ? 3 : 2;
        if (stack.size() < n) return pkl;
        const size_t start = stack[stack.size() - n].start;
        pop(n);
        stack.push_back({start, false});
        break;
      }
      case 's': {  // dict key value → MARK before the key, SETITEMS
        if (stack.size() < 3) return pkl;
        out.insert(stack[stack.size() - 2].start, 1, '(');
        out += 'u';
        pop(2);
        i += 1;
        continue;
      }
      case 'b':  // dict state BUILD: drop the state
        if (stack.size() != 2 || i + 2 != pkl.size() || pkl[i + 1] != '.') return pkl;
        out.resize(stack.back().start);
        return out + '.';
      case '.':
        return out + '.';
      default:
        return pkl;  // an opcode outside this walk
    }
    if (i + 1 + arg > pkl.size()) return pkl;
    out.append(pkl, i, 1 + arg);
    i += 1 + arg;
  }
  return pkl;
}

}  // namespace tessera::io
