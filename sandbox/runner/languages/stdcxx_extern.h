// Explicit instantiation declarations added after <bits/stdc++.h> in the precompiled header
// (pch.py): GCC writes a PCH before it instantiates the templates the header's own inline
// functions use, so every TU that includes it would instantiate them again (~1100 functions,
// most of a bare TU's CPU). A declaration here stops that for a non-inline template and
// everything only it uses; the definitions are compiled once, with the same flags, into
// libvrstdcxx.a (one object per line), linked after the program, so the linker takes only
// the objects a program calls, as it does from libstdc++.a. Only library internals and
// library types are named: no program may legally specialise them, so its meaning is
// unchanged. One declaration per line; each line's definition is the line without "extern".
// C++17 special functions: bits/specfun.h's float and long double overloads are inline non-templates
extern template float std::__detail::__assoc_legendre_p<float>(unsigned int, unsigned int, float, float);
extern template long double std::__detail::__assoc_legendre_p<long double>(unsigned int, unsigned int, long double, long double);
extern template float std::__detail::__comp_ellint_1<float>(float);
extern template long double std::__detail::__comp_ellint_1<long double>(long double);
extern template float std::__detail::__comp_ellint_2<float>(float);
extern template long double std::__detail::__comp_ellint_2<long double>(long double);
extern template float std::__detail::__comp_ellint_3<float>(float, float);
extern template long double std::__detail::__comp_ellint_3<long double>(long double, long double);
extern template float std::__detail::__cyl_bessel_i<float>(float, float);
extern template long double std::__detail::__cyl_bessel_i<long double>(long double, long double);
extern template float std::__detail::__cyl_bessel_j<float>(float, float);
extern template long double std::__detail::__cyl_bessel_j<long double>(long double, long double);
extern template float std::__detail::__cyl_bessel_k<float>(float, float);
extern template long double std::__detail::__cyl_bessel_k<long double>(long double, long double);
extern template float std::__detail::__cyl_neumann_n<float>(float, float);
extern template long double std::__detail::__cyl_neumann_n<long double>(long double, long double);
extern template float std::__detail::__ellint_1<float>(float, float);
extern template long double std::__detail::__ellint_1<long double>(long double, long double);
extern template float std::__detail::__ellint_2<float>(float, float);
extern template long double std::__detail::__ellint_2<long double>(long double, long double);
extern template float std::__detail::__ellint_3<float>(float, float, float);
extern template long double std::__detail::__ellint_3<long double>(long double, long double, long double);
extern template float std::__detail::__poly_legendre_p<float>(unsigned int, float);
extern template long double std::__detail::__poly_legendre_p<long double>(unsigned int, long double);
extern template float std::__detail::__riemann_zeta<float>(float);
extern template long double std::__detail::__riemann_zeta<long double>(long double);
extern template float std::__detail::__sph_bessel<float>(unsigned int, float);
extern template long double std::__detail::__sph_bessel<long double>(unsigned int, long double);
extern template float std::__detail::__sph_legendre<float>(unsigned int, unsigned int, float);
extern template long double std::__detail::__sph_legendre<long double>(unsigned int, unsigned int, long double);
extern template float std::__detail::__sph_neumann<float>(unsigned int, float);
extern template long double std::__detail::__sph_neumann<long double>(unsigned int, long double);
extern template float std::__detail::__beta_lgamma<float>(float, float);
extern template long double std::__detail::__beta_lgamma<long double>(long double, long double);
extern template float std::__detail::__ellint_rf<float>(float, float, float);
extern template long double std::__detail::__ellint_rf<long double>(long double, long double, long double);
extern template float std::__detail::__ellint_rd<float>(float, float, float);
extern template long double std::__detail::__ellint_rd<long double>(long double, long double, long double);
extern template float std::__detail::__ellint_rj<float>(float, float, float, float);
extern template long double std::__detail::__ellint_rj<long double>(long double, long double, long double, long double);
extern template float std::__detail::__cyl_bessel_ij_series<float>(float, float, float, unsigned int);
extern template long double std::__detail::__cyl_bessel_ij_series<long double>(long double, long double, long double, unsigned int);
extern template float std::__detail::__expint_Ei<float>(float);
extern template long double std::__detail::__expint_Ei<long double>(long double);
extern template float std::__detail::__poly_hermite_recursion<float>(unsigned int, float);
extern template long double std::__detail::__poly_hermite_recursion<long double>(unsigned int, long double);
extern template float std::__detail::__riemann_zeta_product<float>(float);
extern template float std::__detail::__riemann_zeta_glob<float>(float);
extern template float std::__detail::__riemann_zeta_sum<float>(float);
extern template long double std::__detail::__riemann_zeta_product<long double>(long double);
extern template long double std::__detail::__riemann_zeta_glob<long double>(long double);
extern template long double std::__detail::__riemann_zeta_sum<long double>(long double);
extern template float std::__detail::__ellint_rc<float>(float, float);
extern template long double std::__detail::__ellint_rc<long double>(long double, long double);
extern template float std::__detail::__expint_E1<float>(float);
extern template float std::__detail::__expint_Ei_series<float>(float);
extern template float std::__detail::__expint_Ei_asymp<float>(float);
extern template long double std::__detail::__expint_E1<long double>(long double);
extern template long double std::__detail::__expint_Ei_series<long double>(long double);
extern template long double std::__detail::__expint_Ei_asymp<long double>(long double);
extern template float std::__detail::__expint_E1_series<float>(float);
extern template float std::__detail::__expint_En_cont_frac<float>(unsigned int, float);
extern template float std::__detail::__expint_E1_asymp<float>(float);
extern template long double std::__detail::__expint_E1_series<long double>(long double);
extern template long double std::__detail::__expint_En_cont_frac<long double>(unsigned int, long double);
extern template long double std::__detail::__expint_E1_asymp<long double>(long double);
extern template float std::__detail::__poly_laguerre<unsigned int, float>(unsigned int, unsigned int, float);
extern template long double std::__detail::__poly_laguerre<unsigned int, long double>(unsigned int, unsigned int, long double);
// std::stoi ... std::stold and their wstring overloads
extern template int __gnu_cxx::__stoa<long, int, char, int>(long (*)(const char*, char**, int), const char*, const char*, std::size_t*, int);
extern template long __gnu_cxx::__stoa<long, long, char, int>(long (*)(const char*, char**, int), const char*, const char*, std::size_t*, int);
extern template unsigned long __gnu_cxx::__stoa<unsigned long, unsigned long, char, int>(unsigned long (*)(const char*, char**, int), const char*, const char*, std::size_t*, int);
extern template long long __gnu_cxx::__stoa<long long, long long, char, int>(long long (*)(const char*, char**, int), const char*, const char*, std::size_t*, int);
extern template unsigned long long __gnu_cxx::__stoa<unsigned long long, unsigned long long, char, int>(unsigned long long (*)(const char*, char**, int), const char*, const char*, std::size_t*, int);
extern template float __gnu_cxx::__stoa<float, float, char>(float (*)(const char*, char**), const char*, const char*, std::size_t*);
extern template double __gnu_cxx::__stoa<double, double, char>(double (*)(const char*, char**), const char*, const char*, std::size_t*);
extern template long double __gnu_cxx::__stoa<long double, long double, char>(long double (*)(const char*, char**), const char*, const char*, std::size_t*);
extern template int __gnu_cxx::__stoa<long, int, wchar_t, int>(long (*)(const wchar_t*, wchar_t**, int), const char*, const wchar_t*, std::size_t*, int);
extern template long __gnu_cxx::__stoa<long, long, wchar_t, int>(long (*)(const wchar_t*, wchar_t**, int), const char*, const wchar_t*, std::size_t*, int);
extern template unsigned long __gnu_cxx::__stoa<unsigned long, unsigned long, wchar_t, int>(unsigned long (*)(const wchar_t*, wchar_t**, int), const char*, const wchar_t*, std::size_t*, int);
extern template long long __gnu_cxx::__stoa<long long, long long, wchar_t, int>(long long (*)(const wchar_t*, wchar_t**, int), const char*, const wchar_t*, std::size_t*, int);
extern template unsigned long long __gnu_cxx::__stoa<unsigned long long, unsigned long long, wchar_t, int>(unsigned long long (*)(const wchar_t*, wchar_t**, int), const char*, const wchar_t*, std::size_t*, int);
extern template float __gnu_cxx::__stoa<float, float, wchar_t>(float (*)(const wchar_t*, wchar_t**), const char*, const wchar_t*, std::size_t*);
extern template double __gnu_cxx::__stoa<double, double, wchar_t>(double (*)(const wchar_t*, wchar_t**), const char*, const wchar_t*, std::size_t*);
extern template long double __gnu_cxx::__stoa<long double, long double, wchar_t>(long double (*)(const wchar_t*, wchar_t**), const char*, const wchar_t*, std::size_t*);
// std::to_string / std::to_wstring of floating-point values
extern template std::__cxx11::basic_string<char> __gnu_cxx::__to_xstring<std::__cxx11::basic_string<char>, char>(int (*)(char*, std::size_t, const char*, __builtin_va_list), std::size_t, const char*, ...);
extern template std::__cxx11::basic_string<wchar_t> __gnu_cxx::__to_xstring<std::__cxx11::basic_string<wchar_t>, wchar_t>(int (*)(wchar_t*, std::size_t, const wchar_t*, __builtin_va_list), std::size_t, const wchar_t*, ...);
// std::to_chars and std::to_string's integer conversions
extern template void std::__detail::__to_chars_10_impl<unsigned>(char*, unsigned, unsigned) noexcept;
extern template void std::__detail::__to_chars_10_impl<unsigned long>(char*, unsigned, unsigned long) noexcept;
extern template void std::__detail::__to_chars_10_impl<unsigned long long>(char*, unsigned, unsigned long long) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_16<unsigned>(char*, char*, unsigned) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_10<unsigned>(char*, char*, unsigned) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_8<unsigned>(char*, char*, unsigned) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_2<unsigned>(char*, char*, unsigned) noexcept;
extern template std::to_chars_result std::__detail::__to_chars<unsigned>(char*, char*, unsigned, int) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_16<unsigned long>(char*, char*, unsigned long) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_10<unsigned long>(char*, char*, unsigned long) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_8<unsigned long>(char*, char*, unsigned long) noexcept;
extern template std::to_chars_result std::__detail::__to_chars_2<unsigned long>(char*, char*, unsigned long) noexcept;
extern template std::to_chars_result std::__detail::__to_chars<unsigned long>(char*, char*, unsigned long, int) noexcept;
extern template std::to_chars_result std::__to_chars_i<char>(char*, char*, char, int);
extern template std::to_chars_result std::__to_chars_i<signed char>(char*, char*, signed char, int);
extern template std::to_chars_result std::__to_chars_i<unsigned char>(char*, char*, unsigned char, int);
extern template std::to_chars_result std::__to_chars_i<short>(char*, char*, short, int);
extern template std::to_chars_result std::__to_chars_i<unsigned short>(char*, char*, unsigned short, int);
extern template std::to_chars_result std::__to_chars_i<int>(char*, char*, int, int);
extern template std::to_chars_result std::__to_chars_i<unsigned>(char*, char*, unsigned, int);
extern template std::to_chars_result std::__to_chars_i<long>(char*, char*, long, int);
extern template std::to_chars_result std::__to_chars_i<unsigned long>(char*, char*, unsigned long, int);
extern template std::to_chars_result std::__to_chars_i<long long>(char*, char*, long long, int);
extern template std::to_chars_result std::__to_chars_i<unsigned long long>(char*, char*, unsigned long long, int);
// std::promise<void> / std::future<void> (their state's one-time set) and std::thread's join through call_once
extern template void std::call_once<void (std::__future_base::_State_baseV2::*)(std::function<std::unique_ptr<std::__future_base::_Result_base, std::__future_base::_Result_base::_Deleter>()>*, bool*), std::__future_base::_State_baseV2*, std::function<std::unique_ptr<std::__future_base::_Result_base, std::__future_base::_Result_base::_Deleter>()>*, bool*>(std::once_flag&, void (std::__future_base::_State_baseV2::*&&)(std::function<std::unique_ptr<std::__future_base::_Result_base, std::__future_base::_Result_base::_Deleter>()>*, bool*), std::__future_base::_State_baseV2*&&, std::function<std::unique_ptr<std::__future_base::_Result_base, std::__future_base::_Result_base::_Deleter>()>*&&, bool*&&);
extern template void std::call_once<void (std::thread::*)(), std::thread*>(std::once_flag&, void (std::thread::*&&)(), std::thread*&&);
// shared_ptr's control blocks (their vtables would instantiate every virtual member) and the
// make_shared<> of promise<void>'s state and of a mutex; the exception a broken promise stores
extern template class std::_Sp_counted_base<__gnu_cxx::_S_single>;
extern template class std::_Sp_counted_base<__gnu_cxx::_S_mutex>;
extern template class std::_Sp_counted_base<__gnu_cxx::_S_atomic>;
extern template class std::_Sp_counted_ptr_inplace<std::__future_base::_State_baseV2, std::allocator<void>, __gnu_cxx::_S_atomic>;
extern template class std::_Sp_counted_ptr_inplace<std::mutex, std::allocator<void>, __gnu_cxx::_S_atomic>;
extern template std::__allocated_ptr<std::allocator<std::_Sp_counted_ptr_inplace<std::__future_base::_State_baseV2, std::allocator<void>, __gnu_cxx::_S_atomic>>> std::__allocate_guarded<std::allocator<std::_Sp_counted_ptr_inplace<std::__future_base::_State_baseV2, std::allocator<void>, __gnu_cxx::_S_atomic>>>(std::allocator<std::_Sp_counted_ptr_inplace<std::__future_base::_State_baseV2, std::allocator<void>, __gnu_cxx::_S_atomic>>&);
extern template std::__allocated_ptr<std::allocator<std::_Sp_counted_ptr_inplace<std::mutex, std::allocator<void>, __gnu_cxx::_S_atomic>>> std::__allocate_guarded<std::allocator<std::_Sp_counted_ptr_inplace<std::mutex, std::allocator<void>, __gnu_cxx::_S_atomic>>>(std::allocator<std::_Sp_counted_ptr_inplace<std::mutex, std::allocator<void>, __gnu_cxx::_S_atomic>>&);
extern template std::__exception_ptr::exception_ptr std::make_exception_ptr<std::future_error>(std::future_error) noexcept;
// std::u16string / std::u32string (std::string and std::wstring are already in libstdc++) and the
// range constructors libstdc++ instantiates for char and wchar_t
extern template class std::__cxx11::basic_string<char16_t>;
extern template class std::__cxx11::basic_string<char32_t>;
extern template void std::__cxx11::basic_string<char>::_M_construct<const char*>(const char*, const char*, std::forward_iterator_tag);
extern template void std::__cxx11::basic_string<char>::_M_construct<char*>(char*, char*, std::forward_iterator_tag);
extern template void std::__cxx11::basic_string<wchar_t>::_M_construct<const wchar_t*>(const wchar_t*, const wchar_t*, std::forward_iterator_tag);
extern template void std::__cxx11::basic_string<wchar_t>::_M_construct<wchar_t*>(wchar_t*, wchar_t*, std::forward_iterator_tag);
extern template void std::__cxx11::basic_string<char16_t>::_M_construct<const char16_t*>(const char16_t*, const char16_t*, std::forward_iterator_tag);
extern template void std::__cxx11::basic_string<char32_t>::_M_construct<const char32_t*>(const char32_t*, const char32_t*, std::forward_iterator_tag);
// std::filesystem::path's wstring(), u16string(), u32string()
extern template std::__cxx11::basic_string<wchar_t> std::filesystem::__cxx11::path::_S_str_convert<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t>>(std::basic_string_view<char>, const std::allocator<wchar_t>&);
extern template std::__cxx11::basic_string<char16_t> std::filesystem::__cxx11::path::_S_str_convert<char16_t, std::char_traits<char16_t>, std::allocator<char16_t>>(std::basic_string_view<char>, const std::allocator<char16_t>&);
extern template std::__cxx11::basic_string<char32_t> std::filesystem::__cxx11::path::_S_str_convert<char32_t, std::char_traits<char32_t>, std::allocator<char32_t>>(std::basic_string_view<char>, const std::allocator<char32_t>&);
