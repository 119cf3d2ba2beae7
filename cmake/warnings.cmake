# Picky warnings for our own code (curl's PickyWarnings, STYLE.md rule 17).
add_compile_options(
  -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes
  -Wformat=2 -Wno-unused-parameter -Wpointer-arith -Wvla
  -Wimplicit-fallthrough -Wundef)
if(TENBIN_WERROR)
  add_compile_options(-Werror)
endif()
