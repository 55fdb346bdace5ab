# The scalar arithmetic of PSA's lazy steps and of the cumulative L1
# penalty (_psa_math.h: the polynomials and the ranges where they hold).

cdef extern from "_psa_math.h":
    double decay_taylor "skso_decay_taylor"(double z) noexcept nogil
    double expm1_poly "skso_expm1_poly"(double z) noexcept nogil
    double log_decay_series "skso_log_decay_series"(double x) noexcept nogil
    double psa_factor_of_ratio "skso_psa_factor"(double u, double m, double kappa,
                                                 double inv_denom, double f_lo,
                                                 double f_hi) noexcept nogil
    double one_minus_decay "skso_one_minus_decay"(double z) noexcept nogil
    double l1_apply "skso_l1_apply"(double w, double owed_down, double owed_up) noexcept nogil
    # the ranges the polynomials hold in (beside them in _psa_math.h)
    const double TAYLOR_MAX "SKSO_TAYLOR_MAX"
    const double EXPM1_POLY_MAX "SKSO_EXPM1_POLY_MAX"
    const double EXP_NEG4_MAX "SKSO_EXP_NEG4_MAX"
    const double SERIES_RATE_MAX "SKSO_SERIES_RATE_MAX"
