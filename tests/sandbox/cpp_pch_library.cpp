#include <bits/stdc++.h>
using namespace std;
// every library function whose templates the PCH leaves to libvrstdcxx.a (sandbox/runner/languages/stdcxx_extern.h)
static void p(const char* n, long double v) { printf("%s %.21Lg\n", n, v); }
int main() {
  float f = 0.3f, g = 0.7f; double d = 0.3, e = 0.7; long double l = 0.3L, m = 0.7L;
  p("assoc_laguerre", assoc_laguerref(2, 1, f) + assoc_laguerre(2, 1, d) + assoc_laguerrel(2, 1, l));
  p("assoc_legendre", assoc_legendref(2, 1, f) + assoc_legendre(2, 1, d) + assoc_legendrel(2, 1, l));
  p("beta", betaf(f, g) + beta(d, e) + betal(l, m));
  p("comp_ellint_1", comp_ellint_1f(f) + comp_ellint_1(d) + comp_ellint_1l(l));
  p("comp_ellint_2", comp_ellint_2f(f) + comp_ellint_2(d) + comp_ellint_2l(l));
  p("comp_ellint_3", comp_ellint_3f(f, g) + comp_ellint_3(d, e) + comp_ellint_3l(l, m));
  p("cyl_bessel_i", cyl_bessel_if(f, g) + cyl_bessel_i(d, e) + cyl_bessel_il(l, m));
  p("cyl_bessel_j", cyl_bessel_jf(f, g) + cyl_bessel_j(d, e) + cyl_bessel_jl(l, m));
  p("cyl_bessel_k", cyl_bessel_kf(f, g) + cyl_bessel_k(d, e) + cyl_bessel_kl(l, m));
  p("cyl_neumann", cyl_neumannf(f, g) + cyl_neumann(d, e) + cyl_neumannl(l, m));
  p("ellint_1", ellint_1f(f, g) + ellint_1(d, e) + ellint_1l(l, m));
  p("ellint_2", ellint_2f(f, g) + ellint_2(d, e) + ellint_2l(l, m));
  p("ellint_3", ellint_3f(f, g, f) + ellint_3(d, e, d) + ellint_3l(l, m, l));
  p("expint", expintf(g) + expint(e) + expintl(m));
  p("hermite", hermitef(3, f) + hermite(3, d) + hermitel(3, l));
  p("laguerre", laguerref(3, f) + laguerre(3, d) + laguerrel(3, l));
  p("legendre", legendref(3, f) + legendre(3, d) + legendrel(3, l));
  p("riemann_zeta", riemann_zetaf(3.f) + riemann_zeta(3.) + riemann_zetal(3.L));
  p("sph_bessel", sph_besself(2, g) + sph_bessel(2, e) + sph_bessell(2, m));
  p("sph_legendre", sph_legendref(3, 1, f) + sph_legendre(3, 1, d) + sph_legendrel(3, 1, l));
  p("sph_neumann", sph_neumannf(2, g) + sph_neumann(2, e) + sph_neumannl(2, m));
  p("hypot3", hypot(f, g, f) + hypot(d, e, d) + hypot(l, m, l));
  size_t idx = 0;
  printf("sto %d %ld %lu %lld %llu %.9g %.17g %.21Lg\n", stoi(" -42x", &idx), stol("0x1f", nullptr, 16),
         stoul("777", nullptr, 8), stoll("-9223372036854775807"), stoull("18446744073709551615"), stof("1.5e3"),
         stod("2.25"), stold("3.125"));
  printf("idx %zu\n", idx);
  printf("wsto %d %ld %lu %lld %llu %.9g %.17g %.21Lg\n", stoi(L"17"), stol(L"-5"), stoul(L"ff", nullptr, 16),
         stoll(L"123456789012"), stoull(L"42"), stof(L"0.5"), stod(L"0.25"), stold(L"0.125"));
  for (const char* bad : {"", "x", "99999999999999999999"}) {
    try { printf("stoi(%s) %d\n", bad, stoi(bad)); }
    catch (const invalid_argument& ex) { printf("invalid_argument %s\n", ex.what()); }
    catch (const out_of_range& ex) { printf("out_of_range %s\n", ex.what()); }
  }
  try { stof("1e99"); } catch (const out_of_range& ex) { printf("out_of_range %s\n", ex.what()); }
  char buf[80];
  auto tc = [&](auto v, int base) { auto r = to_chars(buf, buf + sizeof buf, v, base); *r.ptr = 0; printf("to_chars %d %s\n", base, buf); };
  for (int base : {2, 8, 10, 16, 36}) {
    tc((char)'A', base); tc((signed char)-100, base); tc((unsigned char)200, base); tc((short)-30000, base);
    tc((unsigned short)60000, base); tc(-123456789, base); tc(4000000000u, base); tc(-1234567890123L, base);
    tc(18446744073709551615UL, base); tc(LLONG_MIN, base); tc(ULLONG_MAX, base);
  }
  auto small = to_chars(buf, buf + 2, 12345);
  printf("to_chars too small %d\n", small.ec == errc::value_too_large);
  cout << to_string(-7) << ' ' << to_string(7u) << ' ' << to_string(-7L) << ' ' << to_string(7UL) << ' '
       << to_string(-7LL) << ' ' << to_string(7ULL) << ' ' << to_string(1.5) << '\n';
  wcout << to_wstring(12345) << L'\n';
  filesystem::path pa("dir/sub/file.txt");
  wstring ws = pa.wstring(); u16string u16 = pa.u16string(); u32string u32 = pa.u32string();
  printf("path %zu %zu %zu %s %s\n", ws.size(), u16.size(), u32.size(), pa.filename().string().c_str(),
         pa.parent_path().generic_string().c_str());
  u16string a16 = u"abc"; a16 += u"def"; a16.insert(1, u"XY"); a16.replace(0, 2, u"Q"); a16.resize(10, u'z');
  u32string a32(U"hello"); a32.append(3, U'!'); a32.erase(1, 2);
  printf("u16 %zu %d u32 %zu %d cmp %d\n", a16.size(), (int)a16[1], a32.size(), (int)a32.back(),
         a16.compare(u"Qbc") > 0);
  string s1(buf, buf + 3); wstring w1(L"wide"); string s2(s1.begin(), s1.end());
  printf("strings %s %zu %s\n", s1.c_str(), w1.size(), s2.c_str());
  promise<void> pr; future<void> fu = pr.get_future(); thread t([&] { pr.set_value(); }); fu.wait(); t.join();
  promise<int> pi; auto fi = pi.get_future(); pi.set_value(41);
  auto as = async(launch::async, [] { return 1; });
  packaged_task<int(int)> pt([](int x) { return x * 2; }); auto fp = pt.get_future(); pt(21);
  promise<void> pe; auto fe = pe.get_future();
  pe.set_exception(make_exception_ptr(runtime_error("boom")));
  try { fe.get(); } catch (const exception& ex) { printf("future exception %s\n", ex.what()); }
  try { promise<void> q; q.set_value(); q.set_value(); } catch (const future_error& ex) { printf("future_error %d\n", (int)(ex.code() == future_errc::promise_already_satisfied)); }
  shared_future<void> sf = promise<void>().get_future().share(); (void)sf;
  printf("futures %d %d %d\n", fi.get(), as.get(), fp.get());
  future<void> broken; { promise<void> q; broken = q.get_future(); }
  try { broken.get(); } catch (const future_error& ex) { printf("broken %d\n", (int)(ex.code() == future_errc::broken_promise)); }
  auto mp = make_shared<mutex>(); { lock_guard<mutex> lk(*mp); } weak_ptr<mutex> wm = mp;
  shared_ptr<int> si = make_shared<int>(5), sj = si; printf("shared %ld %ld %d\n", mp.use_count(), si.use_count(), *sj);
  mp.reset(); printf("expired %d\n", (int)wm.expired());
  once_flag of; int calls = 0; for (int i = 0; i < 3; i++) call_once(of, [&] { calls++; });
  printf("call_once %d\n", calls);
}
